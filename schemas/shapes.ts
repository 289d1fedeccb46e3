import type { Json } from './jsonSchema.js';

/**
 * Builders of the JSON Schemas that describe response bodies (OpenAPI 3.1, JSON Schema 2020-12).
 * Every builder takes a description, so no field of the document goes without one. Objects are
 * closed (`additionalProperties: false`) and every property required unless named optional: a
 * field the server adds without documenting it fails the tests that receive it.
 */

export type Schema = Json;

/** ISO 8601 UTC with microseconds, as `<iso_timestamp>` of the spec (`2026-01-31T12:00:00.000000Z`). */
const ISO_TIMESTAMP = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?Z$';
/** `YYYY-MM-DD HH:MM:SS`, as `<datetime>` of the spec. */
const DATETIME = '^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}$';

export const integer = (description: string): Schema => ({ type: 'integer', description });
export const number = (description: string): Schema => ({ type: 'number', description });
export const string = (description: string): Schema => ({ type: 'string', description });
export const boolean = (description: string): Schema => ({ type: 'boolean', description });
export const uuid = (description: string): Schema => ({ type: 'string', format: 'uuid', description });
export const uri = (description: string): Schema => ({ type: 'string', format: 'uri', description });
export const isoTimestamp = (description: string): Schema => ({ type: 'string', pattern: ISO_TIMESTAMP, description: `${description} (ISO 8601, UTC)` });
export const datetime = (description: string): Schema => ({ type: 'string', pattern: DATETIME, description: `${description} (YYYY-MM-DD HH:MM:SS, UTC)` });
export const constant = (value: string | boolean | number, description: string): Schema => ({ const: value, description });
export const oneOf = (values: readonly (string | number)[], description: string): Schema => ({ enum: [...values], description });
export const array = (items: Schema, description: string): Schema => ({ type: 'array', items, description });
/** An object whose keys are not fixed (variables, evaluations, a carrier's answer). */
export const anyObject = (description: string): Schema => ({ type: 'object', description });
/** Any JSON value. */
export const anything = (description: string): Schema => ({ description });

/** The schema, or null. */
export function nullable(schema: Schema): Schema {
  if (typeof schema.type === 'string') return { ...schema, type: [schema.type, 'null'] };
  if (Array.isArray(schema.enum)) return { ...schema, enum: [...(schema.enum as unknown[]), null] };
  const { description, ...rest } = schema;
  return { anyOf: [rest, { type: 'null' }], description };
}

/** A closed object: every property required but those in `optional`. */
export function object(properties: Record<string, Schema>, description: string, optional: readonly string[] = []): Schema {
  const required = Object.keys(properties).filter((key) => !optional.includes(key));
  return { type: 'object', description, properties, required, additionalProperties: false };
}

/** The same object with some properties left out (e.g. a create response without the counts of a read). */
export function without(schema: Schema, keys: readonly string[], description?: string): Schema {
  const properties = { ...(schema.properties as Record<string, Schema>) };
  for (const key of keys) delete properties[key];
  return { ...schema, description: description ?? schema.description, properties, required: (schema.required as string[]).filter((key) => !keys.includes(key)) };
}

/** The same object with more properties. */
export function extend(schema: Schema, more: Record<string, Schema>, description?: string): Schema {
  return { ...schema, description: description ?? schema.description, properties: { ...(schema.properties as Record<string, Schema>), ...more }, required: [...(schema.required as string[]), ...Object.keys(more)] };
}

// Envelopes.

export const message = (description: string): Schema => object({ message: string('What happened, in words for people') }, description);
export const dataOf = (data: Schema, description: string): Schema => object({ data }, description);
export const messageWith = (data: Schema, description: string): Schema => object({ message: string('What happened, in words for people'), data }, description);

/** The pagination envelope of spec 2.11 around `item`. */
export function paginated(item: Schema, description: string, more: Record<string, Schema> = {}): Schema {
  const pageUrl = (what: string) => uri(`URL of the ${what} page, with the request's other query parameters`);
  const optional = Object.keys(more);
  return object(
    {
      current_page: integer('This page, from 1'),
      data: array(item, 'Items of this page'),
      first_page_url: pageUrl('first'),
      from: nullable(integer('Position of the first item of this page in the whole list, from 1; null when the page is empty')),
      last_page: integer('Number of the last page (1 when there are no items)'),
      last_page_url: pageUrl('last'),
      links: array(
        object(
          {
            url: nullable(uri('Where the link goes; null for a gap or a disabled previous/next')),
            label: string('Page number, "...", "&laquo; Previous" or "Next &raquo;"'),
            active: boolean('Whether this is the current page'),
          },
          'A link of the pager',
        ),
        'Pager links, Laravel style: previous, page numbers with "..." gaps, next',
      ),
      next_page_url: nullable(uri('URL of the next page; null on the last')),
      path: uri('URL of the listing without a query string'),
      per_page: integer('Items per page'),
      prev_page_url: nullable(uri('URL of the previous page; null on the first')),
      to: nullable(integer('Position of the last item of this page; null when the page is empty')),
      total: integer('Items in the whole list'),
      ...more,
    },
    description,
    optional,
  );
}

// Error bodies (spec section 7). Which a route answers depends on its family (`ErrorFamily`).

export const validationError: Schema = object(
  {
    message: string('The first error (and how many more), or the message the operation words'),
    errors: { type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } }, description: 'Messages by field, in dotted paths (`links.0.link`)' },
  },
  'Validation failed',
);

export const errorBodies = {
  message: object({ message: string('Why the request failed') }, 'An error'),
  error: object({ error: string('Why the request failed') }, 'An error (knowledgebase and document operations)'),
  conversation: object({ status: constant(false, 'Always false'), error: string('Why the request failed') }, 'An error (conversation operations)'),
} as const satisfies Record<string, Schema>;
