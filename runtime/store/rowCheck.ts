import type { ZodTypeAny } from 'zod';

/**
 * Row schemas (`sql.type(zodSchema)`) compiled into plain checking functions. zod's own parse
 * builds a status object and an issue context per value, several per column: about a tenth of a
 * server thread's time on a read of a 66-column assistant. The compiled check accepts exactly what
 * the schema accepts and returns what zod's parse would (unknown keys stripped, arrays and records
 * copied, `__proto__` keys dropped), for the kinds of schema rows use: objects, strings, numbers,
 * booleans, enums, nullable, arrays, records, unions and unknown, without refinements, defaults or
 * transforms. A schema with anything else is not compiled, and a value the check refuses goes to
 * zod, whose issues then make the error; so the check only ever takes the fast path for values zod
 * accepts too.
 */

/** What a compiled check returns for a value the schema refuses. */
export const REFUSED: unique symbol = Symbol('refused');
export type RowCheck = (value: unknown) => unknown;

const compiled = new WeakMap<ZodTypeAny, RowCheck | null>();

/** The compiled check of `schema`, or null when it has a part the compiler does not know. */
export function rowCheck(schema: ZodTypeAny): RowCheck | null {
  let check = compiled.get(schema);
  if (check === undefined) {
    check = compile(schema);
    compiled.set(schema, check);
  }
  return check;
}

/** zod's "object" (ZodParsedType.object): not null, an array, a thenable, a Map, a Set or a Date. */
function isObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const thenable = value as { then?: unknown; catch?: unknown };
  if (typeof thenable.then === 'function' && typeof thenable.catch === 'function') return false;
  return !(value instanceof Map || value instanceof Set || value instanceof Date);
}

interface Def {
  readonly typeName: string;
  readonly checks?: readonly unknown[];
  readonly coerce?: boolean;
  readonly [key: string]: unknown;
}

function compile(schema: ZodTypeAny): RowCheck | null {
  const def = schema._def as Def;
  switch (def.typeName) {
    case 'ZodString':
      if (def.checks?.length || def.coerce) return null;
      return (value) => (typeof value === 'string' ? value : REFUSED);
    case 'ZodNumber':
      if (def.checks?.length || def.coerce) return null;
      return (value) => (typeof value === 'number' && !Number.isNaN(value) ? value : REFUSED);
    case 'ZodBoolean':
      if (def.coerce) return null;
      return (value) => (typeof value === 'boolean' ? value : REFUSED);
    case 'ZodUnknown':
    case 'ZodAny':
      return (value) => value;
    case 'ZodEnum': {
      const values = new Set(def.values as readonly string[]);
      return (value) => (typeof value === 'string' && values.has(value) ? value : REFUSED);
    }
    case 'ZodNullable': {
      const inner = compile(def.innerType as ZodTypeAny);
      if (!inner) return null;
      return (value) => (value === null ? null : inner(value));
    }
    case 'ZodOptional': {
      const inner = compile(def.innerType as ZodTypeAny);
      if (!inner) return null;
      return (value) => (value === undefined ? undefined : inner(value));
    }
    case 'ZodArray': {
      if (def.exactLength !== null || def.minLength !== null || def.maxLength !== null) return null;
      const element = compile(def.type as ZodTypeAny);
      if (!element) return null;
      return (value) => {
        if (!Array.isArray(value)) return REFUSED;
        const out = new Array<unknown>(value.length);
        for (let i = 0; i < value.length; i++) {
          const item = element(value[i]);
          if (item === REFUSED) return REFUSED;
          out[i] = item;
        }
        return out;
      };
    }
    case 'ZodRecord': {
      const keyDef = (def.keyType as ZodTypeAny)._def as Def;
      if (keyDef.typeName !== 'ZodString' || keyDef.checks?.length || keyDef.coerce) return null;
      const element = compile(def.valueType as ZodTypeAny);
      if (!element) return null;
      return (value) => {
        if (!isObject(value)) return REFUSED;
        const out: Record<string, unknown> = {};
        for (const key in value) {
          const item = element(value[key]);
          if (item === REFUSED) return REFUSED;
          if (key !== '__proto__') out[key] = item;
        }
        return out;
      };
    }
    case 'ZodUnion': {
      const options = (def.options as ZodTypeAny[]).map(compile);
      if (options.some((option) => option === null)) return null;
      const checks = options as RowCheck[];
      return (value) => {
        for (const check of checks) {
          const result = check(value);
          if (result !== REFUSED) return result;
        }
        return REFUSED;
      };
    }
    case 'ZodObject': {
      if (def.unknownKeys !== 'strip' || ((def.catchall as ZodTypeAny)._def as Def).typeName !== 'ZodNever') return null;
      const shape = (def.shape as () => Record<string, ZodTypeAny>)();
      const keys = Object.keys(shape);
      const checks: RowCheck[] = [];
      for (const key of keys) {
        const check = compile(shape[key]!);
        if (!check) return null;
        checks.push(check);
      }
      return (value) => {
        if (!isObject(value)) return REFUSED;
        const out: Record<string, unknown> = {};
        for (let i = 0; i < keys.length; i++) {
          const key = keys[i]!;
          const item = checks[i]!(value[key]);
          if (item === REFUSED) return REFUSED;
          // zod sets a key whose value came out undefined only when the input had it.
          if (key !== '__proto__' && (item !== undefined || key in value)) out[key] = item;
        }
        return out;
      };
    }
    default:
      return null;
  }
}
