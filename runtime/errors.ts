/**
 * The error registry: every error the platform reports has a stable code, an HTTP status and the
 * message the API specification prescribes. `api/` turns these into the body family of the
 * route (`{message}`, `{error}`, `{status: false, error}`) or into a socket error frame; nothing
 * branches on message text.
 */
export const errorRegistry = {
  invalid_json: { status: 400, message: 'The request body is not valid JSON.' },
  bad_request: { status: 400, message: 'Bad request.' },
  unauthenticated: { status: 401, message: 'Unauthenticated.' },
  invalid_credentials: { status: 401, message: 'Invalid credentials.' },
  insufficient_balance: { status: 402, message: 'Insufficient balance. Please top up your account.' },
  /** A channel webhook whose signature is missing or does not match the channel's secret. */
  channel_signature_invalid: { status: 401, message: 'The request signature is not valid.' },
  forbidden: { status: 403, message: 'This action is unauthorized.' },
  /** GET /metrics without METRICS_TOKEN set, asked from another machine (or through a proxy). */
  metrics_loopback_only: { status: 403, message: 'Metrics are served only to this machine. Set METRICS_TOKEN to scrape them from elsewhere.' },
  not_found: { status: 404, message: 'Not found.' },
  user_not_found: { status: 404, message: 'User not found.' },
  api_key_not_found: { status: 404, message: 'API key not found.' },
  knowledgebase_not_found: { status: 404, message: 'Knowledgebase not found.' },
  document_not_found: { status: 404, message: 'Document not found.' },
  tool_not_found: { status: 404, message: 'Tool not found' },
  assistant_not_found: { status: 404, message: 'Assistant not found' },
  phone_number_not_found: { status: 404, message: 'Phone number not found.' },
  conversation_not_found: { status: 404, message: 'Conversation not found' },
  call_not_found: { status: 404, message: 'Call not found' },
  campaign_not_found: { status: 404, message: 'Campaign not found' },
  channel_not_found: { status: 404, message: 'Channel not found.' },
  do_not_call_not_found: { status: 404, message: 'The number is not on the do-not-call list.' },
  webhook_delivery_not_found: { status: 404, message: 'Webhook delivery not found.' },
  voice_not_found: { status: 404, message: 'Voice not found.' },
  /** What a visitor is told; the conversation's owner is told the reason ("Failed to process message: <reason>"). */
  provider_failed: { status: 502, message: 'The assistant is not available right now.' },
  tool_limit_reached: { status: 403, message: 'You have reached the maximum of mid-call tools allowed on your plan. Please upgrade your plan to create more.' },
  method_not_allowed: { status: 405, message: 'Method not allowed.' },
  payload_too_large: { status: 413, message: 'The request body is too large.' },
  unsupported_media_type: { status: 415, message: 'Unsupported content type.' },
  validation_failed: { status: 422, message: 'The given data was invalid.' },
  /** Internal to the dialler: a campaign lead's attempt is no longer this process's to dial (never an answer to a request). */
  campaign_attempt_taken: { status: 409, message: 'This attempt of the campaign lead is dialled elsewhere.' },
  too_many_requests: { status: 429, message: 'Too many requests. Please try again later.' },
  internal: { status: 500, message: 'Server error.' },
  service_unavailable: { status: 503, message: 'Service unavailable.' },
  /** The server is stopping (or still starting): nothing new is taken on; the client tries again shortly (`Retry-After`). */
  shutting_down: { status: 503, message: 'The server is restarting. Please try again in a moment.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof errorRegistry;

export interface PlatformErrorOptions {
  /** Overrides the registry message where the specification words one operation differently. */
  readonly message?: string;
  readonly cause?: unknown;
  /** Extra response headers, e.g. `Retry-After` for 429. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** Base of every error the platform raises on purpose. */
export class PlatformError extends Error {
  override readonly name: string = 'PlatformError';
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;

  constructor(readonly code: ErrorCode, options: PlatformErrorOptions = {}) {
    super(options.message ?? errorRegistry[code].message, { cause: options.cause });
    this.statusCode = errorRegistry[code].status;
    this.headers = options.headers ?? {};
  }
}

/** Field errors in the Laravel shape: `{field: ["The field ...", ...]}`. */
export type FieldErrors = Record<string, string[]>;

/** 422 with field errors; `message` defaults to the Laravel summary of the first error. */
export class ValidationError extends PlatformError {
  override readonly name = 'ValidationError';

  constructor(readonly errors: FieldErrors, message?: string) {
    super('validation_failed', { message: message ?? summarize(errors) });
  }

  /** One field, one message: the common case of a rule checked in a service. */
  static field(field: string, message: string, summary?: string): ValidationError {
    return new ValidationError({ [field]: [message] }, summary);
  }
}

/** Laravel's summary: the first message, plus "(and N more errors)". */
export function summarize(errors: FieldErrors): string {
  const all = Object.values(errors).flat();
  const first = all[0] ?? errorRegistry.validation_failed.message;
  const more = all.length - 1;
  if (more <= 0) return first;
  return `${first} (and ${more} more error${more === 1 ? '' : 's'})`;
}

/**
 * A start-up refusal the operator resolves by changing something (a setting, a directory,
 * another process): the message is one line saying what blocks and what to change, meant to be
 * printed alone, without a stack trace.
 */
export class StartupError extends Error {
  override readonly name: string = 'StartupError';

  constructor(message: string, options: { readonly cause?: unknown } = {}) {
    super(message, options);
  }
}
