/**
 * JSON Schema (2020-12, the dialect of OpenAPI 3.1) of the fastest-validator rules built in
 * `rules.ts`: what the OpenAPI document says of request bodies, query parameters and the
 * assistant's fields in responses, read from the very rules that validate them. A rule's limits
 * become both keywords (`minimum`, `maxLength`, `default`) and words at the end of its description
 * ("0 to 1. Default 0.7."), so people and generators read the same numbers the validator checks.
 */

export type Json = Record<string, unknown>;

/** What of a fastest-validator rule the document reads. */
export interface FvRule {
  type?: string;
  optional?: boolean;
  nullable?: boolean;
  description?: string;
  /** The value the platform fills in when the field is left out (documentation only; see `rules.ts`). */
  defaultValue?: unknown;
  min?: number;
  max?: number;
  integer?: boolean;
  pattern?: RegExp | string;
  values?: unknown[];
  items?: FvRule;
  props?: Record<string, FvRule>;
  notEqual?: unknown;
  minChars?: number;
  maxChars?: number;
  /** The schema itself, for a rule JSON Schema says otherwise than its type (`idOrUuid`). */
  jsonSchema?: Json;
}

/** Integer bounds that only keep ids within what JavaScript holds exactly: not worth a word. */
const SAFE = Number.MAX_SAFE_INTEGER;

function limitWords(rule: FvRule): string[] {
  const words: string[] = [];
  const min = rule.min !== undefined && Math.abs(rule.min) !== SAFE ? rule.min : undefined;
  const max = rule.max !== undefined && Math.abs(rule.max) !== SAFE ? rule.max : undefined;
  if (rule.type === 'number') {
    if (min !== undefined && max !== undefined) words.push(`${min} to ${max}.`);
    else if (min !== undefined && min > 1) words.push(`At least ${min}.`);
    else if (max !== undefined) words.push(`At most ${max}.`);
  } else if (rule.type === 'string') {
    if (rule.minChars !== undefined && rule.maxChars !== undefined) words.push(`${rule.minChars} to ${rule.maxChars} characters.`);
    else if (rule.maxChars !== undefined) words.push(`At most ${rule.maxChars} characters.`);
  } else if (rule.type === 'array' && max !== undefined) {
    words.push(`At most ${max} items.`);
  }
  if (rule.defaultValue !== undefined) words.push(`Default ${JSON.stringify(rule.defaultValue)}.`);
  return words;
}

/** The rule's description followed by its limits and default in words; undefined when there is nothing to say. */
function describe(rule: FvRule): string | undefined {
  const words = limitWords(rule);
  const base = rule.description?.trim();
  const text = [base && !/[.!?]$/.test(base) && words.length > 0 ? `${base}.` : base, ...words].filter(Boolean).join(' ');
  return text === '' ? undefined : text;
}

/** JSON Schema of one fastest-validator rule. */
export function jsonSchemaOf(rule: FvRule): Json {
  let schema: Json;
  switch (rule.jsonSchema ? 'given' : rule.type) {
    case 'given':
      schema = { ...rule.jsonSchema };
      break;
    case 'string':
      schema = { type: 'string' };
      if (rule.minChars !== undefined) schema.minLength = rule.minChars;
      if (rule.maxChars !== undefined) schema.maxLength = rule.maxChars;
      if (rule.pattern !== undefined) schema.pattern = rule.pattern instanceof RegExp ? rule.pattern.source : rule.pattern;
      break;
    case 'number':
      schema = { type: rule.integer ? 'integer' : 'number' };
      if (rule.min !== undefined) schema.minimum = rule.min;
      if (rule.max !== undefined) schema.maximum = rule.max;
      if (rule.notEqual !== undefined) schema.not = { const: rule.notEqual };
      break;
    case 'boolean':
      schema = { type: 'boolean' };
      break;
    case 'enum':
      schema = { enum: rule.values ?? [] };
      break;
    case 'email':
      schema = { type: 'string', format: 'email', ...(rule.max !== undefined ? { maxLength: rule.max } : {}) };
      break;
    case 'url':
      schema = { type: 'string', format: 'uri' };
      break;
    case 'uuid':
      schema = { type: 'string', format: 'uuid' };
      break;
    case 'array':
      schema = { type: 'array', items: rule.items ? jsonSchemaOf(rule.items) : {} };
      if (rule.min !== undefined) schema.minItems = rule.min;
      if (rule.max !== undefined) schema.maxItems = rule.max;
      break;
    case 'object':
      schema = objectSchema(rule.props ?? {});
      break;
    case 'record':
      schema = { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean'] } };
      break;
    default:
      schema = {};
  }
  const description = describe(rule);
  if (description) schema.description = description;
  if (rule.defaultValue !== undefined) schema.default = rule.defaultValue;
  if (rule.nullable) {
    if (typeof schema.type === 'string') schema.type = [schema.type, 'null'];
    else if (Array.isArray(schema.enum)) schema.enum = [...(schema.enum as unknown[]), null];
  }
  return schema;
}

/** An object of rules: `properties`, and `required` for the keys whose rule is not optional. */
export function objectSchema(props: Record<string, FvRule>): Json {
  const properties: Json = {};
  const required: string[] = [];
  for (const [name, rule] of Object.entries(props)) {
    if (name.startsWith('$$')) continue;
    properties[name] = jsonSchemaOf(rule);
    if (!rule.optional) required.push(name);
  }
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}) };
}
