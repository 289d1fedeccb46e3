import type { Logger } from '../../runtime/logger.js';
import type { Principal } from '../../runtime/auth/service.js';

/** A file part of a multipart body. `data` is a copy owned by the request. */
export interface UploadedFile {
  readonly field: string;
  readonly filename: string;
  readonly contentType: string;
  readonly data: Buffer;
}

/**
 * The plain request a handler receives: everything copied out of uWS before the first await,
 * so handlers never touch the (stack-allocated) uWS request.
 */
export interface ApiRequest {
  readonly id: string;
  readonly method: string;
  /** Path without the query string, percent-decoding left to params. */
  readonly path: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, QueryValue>>;
  /** Raw query string, kept for pagination links. */
  readonly rawQuery: string;
  /** Header names lower-cased. */
  readonly headers: Readonly<Record<string, string>>;
  readonly ip: string;
  readonly rawBody: Buffer;
  /** Parsed JSON, urlencoded or multipart fields; `{}` when there is no body. */
  readonly body: unknown;
  readonly files: Readonly<Record<string, UploadedFile>>;
  /** Set for routes that require a user. */
  readonly principal: Principal | undefined;
  readonly log: Logger;
}

export type QueryValue = string | string[] | QueryObject;
export interface QueryObject {
  [key: string]: QueryValue;
}

export interface ApiResponse {
  readonly status: number;
  /** Serialised as JSON unless it is a string/Buffer with an explicit content type, or a `StreamBody`. */
  readonly body?: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A body sent as it is read (a file), `size` bytes in all, at the pace the client takes it. */
export class StreamBody {
  constructor(
    readonly size: number,
    readonly chunks: () => AsyncIterable<Buffer>,
  ) {}
}

/**
 * Which body shape errors of a route take (spec section 7): `message` for assistants, tools,
 * keys and most others; `error` for knowledgebases and documents; `conversation` for the public
 * conversation operations. Validation errors are always `{message, errors}`.
 */
export type ErrorFamily = 'message' | 'error' | 'conversation';

export type Handler = (req: ApiRequest) => Promise<ApiResponse> | ApiResponse;

export interface RouteDefinition {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Path with `:name` parameters, e.g. `/api/user/api-keys/:id`. */
  readonly path: string;
  readonly handler: Handler;
  /**
   * `user`: bearer token of a user; `admin`: the operator token; `none`: public; `optional`: public,
   * but a bearer token, when sent, must be valid and identifies the caller.
   */
  readonly auth: 'user' | 'admin' | 'none' | 'optional';
  readonly family?: ErrorFamily;
  /** Message of a 500 on this route where the specification words one ("Failed to create ..."). */
  readonly failureMessage?: string;
  /** Accepts multipart uploads (larger body limit). */
  readonly multipart?: boolean;
  /** Takes a body of any type (a JSON list of leads) up to the multipart limit, not only multipart ones. */
  readonly largeBody?: boolean;
  /**
   * Served while the server stops (carrier webhooks and status callbacks, which live calls need,
   * and health, which says it is stopping); every other route answers 503 then.
   */
  readonly duringStop?: boolean;
  /** The answer to a body over the limit, where the operation words it (default 413). */
  readonly tooLarge?: ApiResponse;
  /** For the OpenAPI document. */
  readonly summary?: string;
  readonly tag?: string;
  readonly requestSchema?: unknown;
  readonly querySchema?: unknown;
  /**
   * The answers of this operation by status: every success status, and any answer whose body is
   * not the route's error family (`api/http/contract.ts` builds them). Required of every route: the
   * OpenAPI document and the tests' response checks are made from it.
   */
  readonly responses: Readonly<Record<number, ResponseDoc>>;
  /**
   * Error statuses this route answers in its family's body beyond those every route of its kind
   * answers (401, 404 for a path id, 422 for a schema, 400/413/415 for a body, 500, 503:
   * `answeredStatuses` in `api/openapi.ts`), e.g. 402, 403, 429.
   */
  readonly errors?: readonly number[];
}

/** One documented answer of an operation. */
export interface ResponseDoc {
  readonly description: string;
  /** Schema of a JSON body; absent for a body that is not JSON (`contentType`) or for none. */
  readonly schema?: Readonly<Record<string, unknown>>;
  /** Media type of a body that is not JSON (HTML, JavaScript, TwiML, WAV, Prometheus text). */
  readonly contentType?: string;
}

export const json = (status: number, body: unknown, headers?: Record<string, string>): ApiResponse => ({ status, body, headers });
