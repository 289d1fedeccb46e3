/**
 * PostgreSQL's text and jsonb cannot hold U+0000, and text from outside (a model's answer, a tool's
 * or a webhook receiver's response, a transcript) sometimes carries it. What is stored has it
 * replaced with U+FFFD, the replacement character, rather than the write failing.
 */
export function storableText(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
}

/** `storableText` applied to every string (and key) of a JSON value. */
export function storableJson<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (Array.isArray(value)) return value.map(storableJson) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [storableText(key), storableJson(item)])) as T;
  }
  return value;
}
