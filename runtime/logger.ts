import { pino, type Logger } from 'pino';
import type { LogLevel } from './config.js';

export type { Logger };

/**
 * Errors as log fields, without the query values and rows that database errors carry: those
 * hold user data, password hashes and token digests.
 */
function serializeError(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error) as unknown as Record<string, unknown>;
  if (serialized && typeof serialized === 'object') {
    delete serialized.values;
    delete serialized.row;
  }
  return serialized;
}

/**
 * JSON logs on stdout, each line's `time` an ISO 8601 string in UTC. Secrets never reach a line: authorization headers, tokens and passwords
 * are redacted wherever they appear in the structured fields.
 */
export function createLogger(level: LogLevel, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      serializers: { err: serializeError },
      redact: {
        paths: [
          'authorization',
          'token',
          'password',
          '*.authorization',
          '*.token',
          '*.password',
          'headers.authorization',
          'req.headers.authorization',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
