/**
 * Prompt text the platform writes for a model: assistants' templates with their variables, and
 * the schema line of a JSON extraction (post-call evaluation), whose marker the dev model reads to
 * fill the fields without a network.
 */

/** `{{name}}` placeholders replaced by the variables; unknown ones become empty text. */
export function renderTemplate(template: string, variables: Record<string, unknown>): string {
  return template.replace(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g, (_, name: string) => {
    const value = Object.hasOwn(variables, name) ? variables[name] : undefined;
    return value === undefined || value === null ? '' : String(value);
  });
}

/** Heads the line of a system prompt that lists the fields to extract, as a JSON array. */
export const EXTRACTION_FIELDS_MARKER = 'Fields: ';

/** The fields of an extraction (`name`, `type`, `description`) as the system prompt's last line. */
export function extractionFields(fields: ReadonlyArray<{ readonly name: string; readonly type: string; readonly description: string }>): string {
  return `${EXTRACTION_FIELDS_MARKER}${JSON.stringify(fields)}`;
}
