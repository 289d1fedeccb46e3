import FastestValidator, { type ValidationError as FvError, type ValidationRule, type ValidationSchema } from 'fastest-validator';
import { ValidationError, type FieldErrors } from '../runtime/errors.js';

/**
 * Request validation: fastest-validator schemas compiled once at module load, with failures
 * reported as Laravel would (`{message, errors: {field: ["The name field is required."]}}`).
 * Every endpoint validates through `compileSchema`; the message mapping lives only here.
 */

/** Laravel message templates by fastest-validator error type. `{field}` becomes the attribute. */
const laravelMessages: Record<string, string> = {
  required: 'The {field} field is required.',
  string: 'The {field} must be a string.',
  stringEmpty: 'The {field} field is required.',
  stringMin: 'The {field} must be at least {expected} characters.',
  stringMax: 'The {field} may not be greater than {expected} characters.',
  stringLength: 'The {field} must be {expected} characters.',
  stringPattern: 'The {field} format is invalid.',
  stringEnum: 'The selected {field} is invalid.',
  stringNumeric: 'The {field} must be a number.',
  stringAlpha: 'The {field} may only contain letters.',
  enumValue: 'The selected {field} is invalid.',
  number: 'The {field} must be a number.',
  numberInteger: 'The {field} must be an integer.',
  numberMin: 'The {field} must be at least {expected}.',
  numberMax: 'The {field} may not be greater than {expected}.',
  numberPositive: 'The {field} must be greater than 0.',
  numberNotEqual: 'The {field} must not be {expected}.',
  numberDecimals: 'The {field} may not have more than {expected} decimal places.',
  boolean: 'The {field} field must be true or false.',
  array: 'The {field} must be an array.',
  arrayEmpty: 'The {field} field is required.',
  arrayMin: 'The {field} must have at least {expected} items.',
  arrayMax: 'The {field} may not have more than {expected} items.',
  arrayUnique: 'The {field} field has a duplicate value.',
  object: 'The {field} must be an object.',
  objectMaxProps: 'The {field} may not have more than {expected} keys.',
  email: 'The {field} must be a valid email address.',
  emailEmpty: 'The {field} field is required.',
  emailMax: 'The {field} may not be greater than {expected} characters.',
  url: 'The {field} must be a valid URL.',
  urlEmpty: 'The {field} field is required.',
  uuid: 'The {field} must be a valid UUID.',
  date: 'The {field} is not a valid date.',
  record: 'The {field} must be an object.',
  recordValue: 'The {field} must be a string, number or boolean.',
  recordMaxKeys: 'The {field} may not have more than {expected} keys.',
};

/**
 * The attribute is wrapped in U+0001 marks in the templates given to fastest-validator, so the raw
 * path can be found and rewritten after the fact; rule-level custom messages carry no marks and
 * pass through untouched.
 */
const MARK = '\u0001';
/** A custom message template whose `{field}` is rewritten like the built-in ones. */
export function fieldTemplate(template: string): string {
  return template.replace('{field}', `${MARK}{field}${MARK}`);
}
const MARKED = new RegExp(`${MARK}([^${MARK}]*)${MARK}`, 'g');
// The package is CommonJS typed as an ES default export; under NodeNext the class is `.default`.
const Validator = ((FastestValidator as unknown as { default?: typeof FastestValidator }).default ?? FastestValidator) as unknown as typeof FastestValidator.default;
const validator = new Validator({
  useNewCustomCheckerFunction: true,
  messages: Object.fromEntries(Object.entries(laravelMessages).map(([type, text]) => [type, fieldTemplate(text)])),
});

/** fastest-validator paths (`links[0].link`) in Laravel's dotted form (`links.0.link`). */
function dotted(path: string): string {
  return path.replace(/\[(\d+)\]/g, '.$1');
}

/** Laravel's attribute label: the dotted path with underscores as spaces. */
export function attributeName(field: string): string {
  return dotted(field).replace(/_/g, ' ');
}

function typeMessage(rule: ValidationRule, attribute: string): string {
  const type = typeof rule === 'string' ? rule : Array.isArray(rule) ? 'any' : (rule as { type?: string }).type ?? 'any';
  const template = laravelMessages[type] ?? 'The {field} is invalid.';
  return template.replace('{field}', attribute).replace('{expected}', '');
}

interface RuleObject {
  type?: string;
  optional?: boolean;
  nullable?: boolean;
  props?: Record<string, ValidationRule>;
  items?: ValidationRule;
}

type FieldVisitor = (record: Record<string, unknown>, key: string, rule: RuleObject, path: string) => void;

/** Calls `visit` for each key of `value` that `rules` describes, in nested objects and arrays of objects too. */
function eachField(rules: Record<string, ValidationRule>, value: unknown, prefix: string, visit: FieldVisitor): void {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return;
  const record = value as Record<string, unknown>;
  for (const [key, rule] of Object.entries(rules)) {
    if (key.startsWith('$$') || typeof rule !== 'object' || Array.isArray(rule)) continue;
    const path = prefix === '' ? key : `${prefix}.${key}`;
    const object = rule as RuleObject;
    visit(record, key, object, path);
    const field = record[key];
    if (object.type === 'object' && object.props) {
      eachField(object.props, field, path, visit);
    } else if (object.type === 'array' && Array.isArray(field) && typeof object.items === 'object' && (object.items as RuleObject).props) {
      field.forEach((item, index) => eachField((object.items as RuleObject).props!, item, `${path}.${index}`, visit));
    }
  }
}

/**
 * An empty string means "no value", as in Laravel (forms send empty inputs as ""): in a nullable
 * field it becomes `null` before the rules run, so an optional description may be left blank; in
 * an optional number, boolean or choice (a form's `relative_links_limit=`) the field counts as
 * not sent, so its default applies. A required or text field keeps it ("is required").
 */
const blankToNull: FieldVisitor = (record, key, rule) => {
  if (record[key] !== '') return;
  if (rule.nullable) record[key] = null;
  else if (rule.optional && BLANK_IS_ABSENT.has(rule.type ?? '')) delete record[key];
};
const BLANK_IS_ABSENT = new Set(['number', 'boolean', 'enum']);

/**
 * fastest-validator lets `null` through any optional rule; here `null` is only valid where the rule
 * says `nullable: true`, so an update cannot null a required column.
 */
function nullRejecter(errors: FieldErrors): FieldVisitor {
  return (record, key, rule, path) => {
    if (record[key] === null && rule.optional && !rule.nullable) (errors[path] ??= []).push(typeMessage(rule as ValidationRule, attributeName(path)));
  };
}

/**
 * PostgreSQL text and jsonb cannot hold U+0000, so a string (or key) with one anywhere in what was
 * accepted is a 422 naming it, instead of a failed insert.
 */
function rejectNulCharacters(value: unknown, path: string, errors: FieldErrors): void {
  if (typeof value === 'string') {
    if (value.includes('\u0000')) (errors[path] ??= []).push(`The ${attributeName(path)} must not contain null characters.`);
  } else if (Array.isArray(value)) {
    value.forEach((item, index) => rejectNulCharacters(item, path === '' ? String(index) : `${path}.${index}`, errors));
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const at = path === '' ? key : `${path}.${key}`;
      if (key.includes('\u0000')) (errors[at] ??= []).push(`The ${attributeName(at)} must not contain null characters.`);
      else rejectNulCharacters(item, at, errors);
    }
  }
}

export interface CompiledSchema<T> {
  /** The schema as written, for the OpenAPI document. */
  readonly schema: ValidationSchema;
  /**
   * Validates and normalises `input` (unknown keys removed, numeric strings converted where the
   * rule says so) and returns it typed.
   * @throws ValidationError with Laravel-style field errors.
   */
  (input: unknown): T;
}

export interface SchemaOptions {
  /** Top-level `message` of the 422 body where an operation words it differently. */
  readonly message?: string;
}

export function compileSchema<T>(schema: ValidationSchema, options: SchemaOptions = {}): CompiledSchema<T> {
  const full: ValidationSchema = { $$strict: 'remove', ...schema };
  const check = validator.compile(full);
  const rules = schema as Record<string, ValidationRule>;
  const run = ((input: unknown): T => {
    const value = input !== null && typeof input === 'object' && !Array.isArray(input) ? input : {};
    eachField(rules, value, '', blankToNull);
    const result = check(value) as true | FvError[];
    const errors: FieldErrors = {};
    if (result !== true) {
      for (const error of result) {
        const field = dotted(error.field ?? '');
        const message = (error.message ?? '').replace(MARKED, (_, path: string) => attributeName(path));
        const list = (errors[field] ??= []);
        if (!list.includes(message)) list.push(message);
      }
    }
    eachField(rules, value, '', nullRejecter(errors));
    rejectNulCharacters(value, '', errors);
    if (Object.keys(errors).length > 0) throw new ValidationError(errors, options.message);
    return value as T;
  }) as CompiledSchema<T>;
  Object.defineProperty(run, 'schema', { value: schema });
  return run;
}
