import {
  createPool,
  createTypeParserPreset,
  SchemaValidationError,
  type DatabasePool,
  type Interceptor,
  type QueryResultRow,
} from 'slonik';
import { pgTimestampToIso } from '../time.js';
import { REFUSED, rowCheck } from './rowCheck.js';

export type { DatabasePool };

/**
 * Rows of typed queries (`sql.type(zodSchema)`) are checked against their schema, so a column
 * that drifts from what the code expects fails loudly at the query rather than downstream. The
 * schema's compiled check (rowCheck.ts) takes the rows it accepts; zod parses the others and
 * words the error.
 */
const resultParser: Interceptor = {
  name: 'result-parser',
  transformRow(context, query, row) {
    const parser = context.resultParser;
    if (!parser) return row;
    const check = rowCheck(parser);
    const checked = check ? check(row) : REFUSED;
    if (checked !== REFUSED) return checked as QueryResultRow;
    const result = parser.safeParse(row);
    if (!result.success) throw new SchemaValidationError(query, row as never, result.error.issues);
    return result.data as QueryResultRow;
  },
};

/**
 * int8 and numeric arrive as JavaScript numbers (ids stay below 2^53; money has six decimals),
 * timestamps as `<iso_timestamp>` strings with microseconds.
 */
const typeParsers = [
  ...createTypeParserPreset().filter((parser) => !['int8', 'timestamptz', 'timestamp'].includes(parser.name)),
  { name: 'int8', parse: (value: string) => Number(value) },
  { name: 'timestamptz', parse: (value: string) => pgTimestampToIso(value) },
  { name: 'timestamp', parse: (value: string) => pgTimestampToIso(value) },
];

export interface PoolOptions {
  readonly maximumPoolSize: number;
}

export async function createDatabasePool(connectionUri: string, options: PoolOptions): Promise<DatabasePool> {
  return createPool(connectionUri, {
    maximumPoolSize: options.maximumPoolSize,
    interceptors: [resultParser],
    typeParsers,
    captureStackTrace: false,
    statementTimeout: 30_000,
    idleTimeout: 60_000,
    // slonik's default runs DISCARD ALL on every release, a second round trip per query. The
    // platform keeps no session state on pooled connections (no SET, temp tables or LISTEN;
    // transactions always end), so there is nothing to reset.
    resetConnection: async () => undefined,
  });
}
