import { fieldTemplate } from './validator.js';


/**
 * Builders for the fastest-validator rules the API uses, so each limit of the specification is
 * written once with its Laravel wording (ranges read "must be between :min and :max").
 */

export interface Presence {
  /** The key may be absent. */
  readonly optional?: boolean;
  /** The key may be `null` (clears a nullable field on update). */
  readonly nullable?: boolean;
  /** Human description for the OpenAPI document (limits and default are added to it in words). */
  readonly description?: string;
  /**
   * What the platform fills in when the field is left out, for the document only: the validator
   * never applies it (an update leaves an absent field as it is).
   */
  readonly defaultValue?: unknown;
}

/** A fastest-validator rule object as built here. */
export type Rule = { type: string; [option: string]: unknown };

function presence(options: Presence): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (options.optional) out.optional = true;
  if (options.nullable) out.nullable = true;
  if (options.description) out.description = options.description;
  if (options.defaultValue !== undefined) out.defaultValue = options.defaultValue;
  return out;
}

/**
 * Text; `min` and `max` count characters (code points, as PHP's mb_strlen and JSON Schema do), so
 * an emoji is one, not two; `notBlank` also refuses text of white space alone, as if it were missing.
 */
export function text(options: Presence & { max?: number; min?: number; pattern?: RegExp; patternMessage?: string; notBlank?: boolean } = {}): Rule {
  const rule: Rule = { type: 'string', empty: false, ...presence(options) };
  const { min, max, notBlank } = options;
  if (min !== undefined || max !== undefined || notBlank) {
    rule.custom = (value: unknown, errors: Array<Record<string, unknown>>) => {
      if (typeof value !== 'string' || value === '') return value;
      if (notBlank && value.trim() === '') errors.push({ type: 'required' });
      const length = min !== undefined || max !== undefined ? characters(value) : 0;
      if (max !== undefined && length > max) errors.push({ type: 'stringMax', expected: max, actual: length });
      if (min !== undefined && length < min) errors.push({ type: 'stringMin', expected: min, actual: length });
      return value;
    };
  }
  // Read by the OpenAPI document (maxLength and minLength count code points too), not by the validator.
  if (max !== undefined) rule.maxChars = max;
  if (min !== undefined) rule.minChars = min;
  if (options.pattern) rule.pattern = options.pattern;
  if (options.patternMessage) rule.messages = { stringPattern: options.patternMessage };
  return rule;
}

/** Characters of a string as people count them: code points, not UTF-16 units. */
function characters(value: string): number {
  let count = 0;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff && i + 1 < value.length) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/**
 * Integers without limits of their own (ids, pages) stay within what JavaScript holds exactly,
 * which is also inside PostgreSQL's bigint: a larger one is a 422, not an out-of-range query.
 */
const INTEGER_LIMIT = Number.MAX_SAFE_INTEGER;

function range(type: 'integer' | 'number', options: Presence & { min?: number; max?: number }): Rule {
  const rule: Rule = { type: 'number', convert: true, ...presence(options) };
  if (type === 'integer') {
    rule.integer = true;
    rule.min = -INTEGER_LIMIT;
    rule.max = INTEGER_LIMIT;
  }
  if (options.min !== undefined) rule.min = options.min;
  if (options.max !== undefined) rule.max = options.max;
  if (options.min !== undefined && options.max !== undefined) {
    const between = fieldTemplate(`The {field} must be between ${options.min} and ${options.max}.`);
    rule.messages = { numberMin: between, numberMax: between };
  }
  return rule;
}

export const integer = (options: Presence & { min?: number; max?: number } = {}): Rule => range('integer', options);

/** A number; with `decimals`, one with more decimal places (money holds six) is refused, not rounded. */
export const number = (options: Presence & { min?: number; max?: number; decimals?: number } = {}): Rule => {
  const rule = range('number', options);
  const { decimals } = options;
  if (decimals === undefined) return rule;
  return {
    ...rule,
    custom(value: unknown, errors: Array<Record<string, unknown>>) {
      // At most `decimals` places, give or take the last bits of a double (4.94 computed as
      // 4.9399999999999995 passes, 600000.1234567 does not), whatever the magnitude.
      if (typeof value === 'number' && Number.isFinite(value) && Math.abs(value - Number(value.toFixed(decimals))) > 4 * Number.EPSILON * Math.max(1, Math.abs(value))) {
        errors.push({ type: 'numberDecimals', expected: decimals });
      }
      return value;
    },
  };
};

export const boolean = (options: Presence = {}): Rule => ({ type: 'boolean', convert: true, ...presence(options) });

export const oneOf = (values: readonly string[], options: Presence = {}): Rule => ({ type: 'enum', values: [...values], ...presence(options) });

/**
 * What fastest-validator's email rule accepts (`^\S+@\S+\.\S+$`: no white space, an `@` after the
 * first character, and a `.` after the character that follows it and before the last), decided in
 * one pass: the rule itself tests that pattern on the whole value whatever its length, in cubic
 * time (a 1 MiB login body would hold the process).
 */
export function looksLikeEmail(value: string): boolean {
  if (/\s/.test(value)) return false;
  const at = value.indexOf('@');
  return at >= 1 && value.lastIndexOf('.', value.length - 2) >= at + 2;
}

/** An email address of at most `max` characters, its length checked before its form. */
export const email = (options: Presence & { max?: number } = {}): Rule => {
  const max = options.max ?? 255;
  return {
    type: 'string',
    empty: false,
    max,
    ...presence(options),
    custom(value: unknown, errors: Array<Record<string, unknown>>) {
      if (typeof value === 'string' && value.length > 0 && value.length <= max && !looksLikeEmail(value)) errors.push({ type: 'email', actual: value });
      return value;
    },
  };
};

/** An http(s) URL that also parses as one (the validator's pattern alone lets `http://[::1` or a port of 99999 through). */
export const url = (options: Presence = {}): Rule => ({
  type: 'url',
  empty: false,
  ...presence(options),
  custom(value: unknown, errors: Array<Record<string, unknown>>) {
    if (typeof value === 'string' && /^https?:\/\//i.test(value) && !URL.canParse(value)) errors.push({ type: 'url', actual: value });
    return value;
  },
});

export const uuid = (options: Presence = {}): Rule => ({ type: 'uuid', ...presence(options) });

/**
 * A resource named either way the API shows it: its integer id (at least 1, within what JavaScript
 * holds exactly) or its UUID. Arrives as text (a query parameter); the caller tells which by
 * `isUuid`. Refused as "The selected {field} is invalid.", as an unknown id is.
 */
export const idOrUuid = (options: Presence = {}): Rule => ({
  type: 'string',
  empty: false,
  ...presence(options),
  custom(value: unknown, errors: Array<Record<string, unknown>>) {
    if (typeof value === 'string' && value !== '' && !isUuid(value) && !(/^[1-9]\d{0,15}$/.test(value) && Number.isSafeInteger(Number(value)))) errors.push({ type: 'stringEnum', actual: value });
    return value;
  },
  // Read by the OpenAPI document, not by the validator.
  jsonSchema: { oneOf: [{ type: 'integer', minimum: 1 }, { type: 'string', format: 'uuid' }] },
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A UUID in its text form, as the `uuid` rule accepts it and PostgreSQL's `uuid` type reads it. */
export const isUuid = (value: string): boolean => UUID.test(value);

export const arrayOf = (items: Rule, options: Presence & { max?: number; min?: number } = {}): Rule => {
  const rule: Rule = { type: 'array', items, ...presence(options) };
  if (options.max !== undefined) rule.max = options.max;
  if (options.min !== undefined) rule.min = options.min;
  return rule;
};

export const object = (props: Record<string, Rule>, options: Presence = {}): Rule => ({
  type: 'object',
  props,
  strict: 'remove',
  ...presence(options),
});

/** Most keys and longest string value of a `record` (assistant, conversation and call variables). */
export const RECORD_MAX_KEYS = 100;
export const RECORD_MAX_VALUE_LENGTH = 10_000;

/**
 * An object with string keys (letters, digits, underscores) and scalar values, such as the
 * variables substituted into prompts: each value a string (at most 10,000 characters), number or
 * boolean, reported per key (`variables.city`); at most 100 keys.
 */
export const record = (options: Presence = {}): Rule => ({
  type: 'record',
  key: { type: 'string', min: 1, max: 64, pattern: /^[A-Za-z_][A-Za-z0-9_]*$/ },
  value: { type: 'any' },
  custom(value: unknown, errors: Array<Record<string, unknown>>, _schema: unknown, path: string) {
    if (value === null || typeof value !== 'object') return value;
    const entries = Object.entries(value);
    if (entries.length > RECORD_MAX_KEYS) errors.push({ type: 'recordMaxKeys', expected: RECORD_MAX_KEYS });
    for (const [key, item] of entries) {
      const scalar = (typeof item === 'number' && Number.isFinite(item)) || typeof item === 'boolean' || (typeof item === 'string' && item.length <= RECORD_MAX_VALUE_LENGTH);
      if (!scalar) errors.push({ type: 'recordValue', field: `${path}.${key}`, actual: item });
    }
    return value;
  },
  ...presence(options),
});
