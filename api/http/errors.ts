import { PlatformError, ValidationError, type ErrorCode } from '../../runtime/errors.js';
import type { Logger } from '../../runtime/logger.js';
import type { ApiResponse, ErrorFamily, RouteDefinition } from './types.js';

/**
 * The one function that turns any error into a response body of the family the route belongs
 * to (spec section 7). Transport-level refusals (authentication, body decoding) are always
 * `{message}`, as the framework middleware in front of every operation would answer.
 */

const TRANSPORT_CODES: ReadonlySet<ErrorCode> = new Set([
  'invalid_json',
  'bad_request',
  'unauthenticated',
  'payload_too_large',
  'unsupported_media_type',
  'method_not_allowed',
]);

export function familyBody(family: ErrorFamily, message: string): Record<string, unknown> {
  switch (family) {
    case 'error':
      return { error: message };
    case 'conversation':
      return { status: false, error: message };
    case 'message':
      return { message };
  }
}

export function errorResponse(error: unknown, route: RouteDefinition | undefined, log: Logger): ApiResponse {
  if (error instanceof ValidationError) {
    return { status: 422, body: { message: error.message, errors: error.errors } };
  }
  if (error instanceof PlatformError) {
    const family = TRANSPORT_CODES.has(error.code) ? 'message' : route?.family ?? 'message';
    // A stop or start under way is the server's state, not a failure of the request.
    if (error.statusCode >= 500 && error.code !== 'shutting_down') log.error({ err: error, code: error.code }, 'request failed');
    return { status: error.statusCode, body: familyBody(family, error.message), headers: error.headers };
  }
  log.error({ err: error }, 'unhandled error');
  const message = route?.failureMessage ?? 'Server error.';
  return { status: 500, body: familyBody(route?.family ?? 'message', message) };
}
