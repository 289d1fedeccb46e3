import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';

/**
 * Checks answers against the OpenAPI document the server publishes: the operation is found by
 * method and path (static segments before `{parameters}`, as the router does), the status must be
 * one the operation documents, and the body must match that answer's schema (JSON Schema 2020-12,
 * compiled with Ajv), or be of its documented media type when it is not JSON, or be empty when it
 * documents none. `test/helpers/platform.ts` runs every answer of `request` through it, so a test
 * whose answer breaks the contract fails with the path, status and field that differ.
 *
 * Not checked: answers to paths or methods no operation has (the router's 404 and 405, CORS
 * preflights), which the document describes in words only.
 */

type Json = Record<string, unknown>;

interface ResponseObject {
  readonly description: string;
  readonly content?: Record<string, { schema?: Json }>;
}

interface Operation {
  readonly operationId: string;
  readonly responses: Record<string, ResponseObject>;
}

export class ContractViolation extends Error {
  override readonly name = 'ContractViolation';
}

/** What differs, one line per error: `/data/0/uuid: must be string` (JSON pointer of the body). */
export function describeErrors(errors: readonly ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .map((error) => {
      const where = error.instancePath === '' ? '(body)' : error.instancePath;
      const extra = 'additionalProperty' in error.params ? ` '${String(error.params.additionalProperty)}'` : 'allowedValues' in error.params ? ` ${JSON.stringify(error.params.allowedValues)}` : '';
      return `${where}: ${error.message ?? 'does not match'}${extra}`;
    })
    .join('\n  ');
}

export function newAjv(): Ajv2020 {
  // Formats (uri, uuid, email) are documentation here; keywords and types are what is checked.
  return new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
}

export class ContractChecker {
  private readonly ajv = newAjv();
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly paths: Array<{ readonly segments: readonly string[]; readonly operations: Record<string, Operation> }>;

  constructor(document: Json) {
    this.paths = Object.entries(document.paths as Record<string, Record<string, Operation>>).map(([path, operations]) => ({ segments: path.split('/').filter(Boolean), operations }));
  }

  /** The operation of a method and path (no query string), as the router would pick it. */
  operation(method: string, path: string): { path: string; operation: Operation } | undefined {
    const parts = path.split('/').filter(Boolean);
    let best: { rank: string; path: string; operation: Operation } | undefined;
    for (const candidate of this.paths) {
      if (candidate.segments.length !== parts.length) continue;
      let rank = '';
      let matches = true;
      for (let i = 0; i < parts.length; i++) {
        const segment = candidate.segments[i]!;
        if (segment.startsWith('{')) rank += '1';
        else if (segment === parts[i]) rank += '0';
        else {
          matches = false;
          break;
        }
      }
      const operation = candidate.operations[method.toLowerCase()];
      if (matches && operation && (!best || rank < best.rank)) best = { rank, path: `/${candidate.segments.join('/')}`, operation };
    }
    return best && { path: best.path, operation: best.operation };
  }

  /**
   * @param body the parsed JSON body, or the text of any other body
   * @throws ContractViolation naming the operation, status and what differs
   */
  check(method: string, url: string, status: number, contentType: string, body: unknown): void {
    const path = new URL(url).pathname;
    const found = this.operation(method, path);
    if (!found) return;
    const where = `${method} ${path} (${found.path}, ${found.operation.operationId}) answered ${status}`;
    const documented = found.operation.responses[String(status)];
    if (!documented) {
      throw new ContractViolation(`${where}: the OpenAPI document has no ${status} answer for this operation (it has ${Object.keys(found.operation.responses).join(', ')}). Body: ${excerpt(body)}`);
    }
    const media = Object.keys(documented.content ?? {})[0];
    const isJson = contentType.includes('json');
    if (media === undefined) {
      if (body !== '' && body !== undefined) throw new ContractViolation(`${where}: documented without a body, but it has one (${contentType}): ${excerpt(body)}`);
      return;
    }
    if (media !== 'application/json') {
      if (!contentType.startsWith(media)) throw new ContractViolation(`${where}: documented as ${media}, answered ${contentType || 'no content type'}: ${excerpt(body)}`);
      return;
    }
    if (!isJson) throw new ContractViolation(`${where}: documented as JSON, answered ${contentType || 'no content type'}: ${excerpt(body)}`);
    const key = `${found.operation.operationId} ${status}`;
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.ajv.compile(documented.content![media]!.schema ?? {});
      this.compiled.set(key, validate);
    }
    if (!validate(body)) throw new ContractViolation(`${where}: the body does not match the OpenAPI document:\n  ${describeErrors(validate.errors)}\nBody: ${excerpt(body)}`);
  }
}

function excerpt(body: unknown): string {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return text === undefined ? '(none)' : text.length > 600 ? `${text.slice(0, 600)}…` : text;
}
