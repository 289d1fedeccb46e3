import type { Schema } from '../../schemas/shapes.js';
import type { ResponseDoc } from './types.js';

/**
 * How a route documents its answers (`RouteDefinition.responses`): a JSON body by its schema (built
 * with `schemas/shapes.ts`, resources in `schemas/responses.ts`), a body that is not JSON by its
 * media type, or no body.
 */

/** A JSON body; the schema's description is the answer's. */
export function body(schema: Schema): ResponseDoc {
  return { description: String(schema.description ?? ''), schema };
}

/** A body that is not JSON. */
export function media(contentType: string, description: string): ResponseDoc {
  return { description, contentType };
}

/** An answer without a body. */
export function noBody(description: string): ResponseDoc {
  return { description };
}
