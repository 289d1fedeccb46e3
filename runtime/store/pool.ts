import { createPgDriverFactory } from '@slonik/pg-driver';
import {
  createPool,
  createTypeParserPreset,
  SchemaValidationError,
  type DatabasePool,
  type DriverFactory,
  type Interceptor,
  type QueryResultRow,
} from 'slonik';
import { within } from '../bounded.js';
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

/**
 * Which statement texts the pool runs as named prepared statements, the way Npgsql's automatic
 * preparation chooses them: a text is named once it has run `minUses` times, up to `capacity`
 * names per pool, so each connection holds at most that many prepared statements whatever SQL the
 * process builds. A named statement is parsed once per connection and PostgreSQL keeps its plan,
 * where an unnamed one is parsed, analysed and planned on every run: for the platform's hot reads
 * (a token, an assistant) that was most of the database's work.
 */
export interface StatementNames {
  /** The name to run `text` under, or undefined to run it unnamed this time. */
  nameOf(text: string): string | undefined;
  /** Gives `text` a new name on its next use: the server refused the prepared one. */
  retire(text: string): void;
}

/**
 * Statements worth a plan: queries and writes. Transaction control and other commands have none,
 * and a named COMMIT that failed must never be run again unnamed (in an aborted transaction
 * PostgreSQL takes COMMIT as ROLLBACK, without an error).
 */
const PREPARABLE = /^\s*(?:SELECT|INSERT|UPDATE|DELETE|WITH|VALUES)\b/i;
/** Longer texts are built from values (bulk inserts) and seldom run twice. */
const MAX_PREPARED_TEXT = 16_384;

export function createStatementNames(options: { minUses: number; capacity: number }): StatementNames {
  const names = new Map<string, string>();
  // Counts of texts not named yet; bounded, since SQL built from values can be any number of texts.
  const uses = new Map<string, number>();
  let next = 0;
  return {
    nameOf(text) {
      if (text.length > MAX_PREPARED_TEXT || !PREPARABLE.test(text)) return undefined;
      const name = names.get(text);
      if (name !== undefined || names.size >= options.capacity) return name;
      const count = (uses.get(text) ?? 0) + 1;
      if (count < options.minUses) {
        if (uses.size >= options.capacity * 10) uses.clear();
        uses.set(text, count);
        return undefined;
      }
      uses.delete(text);
      const assigned = `ap_${next++}`;
      names.set(text, assigned);
      return assigned;
    },
    retire(text) {
      names.delete(text);
    },
  };
}

/**
 * Whether the server refused a named statement before running it: its result type changed under
 * it (another process migrated a table it reads with `*`: SQLSTATE 0A000 raised where the server
 * revalidates a cached plan), or the server lost it (26000).
 */
function staleStatement(error: unknown): boolean {
  const { code, routine } = error as { code?: string; routine?: string };
  return (code === '0A000' && routine === 'RevalidateCachedQuery') || code === '26000';
}

const TRANSACTION_START = /^\s*(?:START\s+TRANSACTION|BEGIN)\b/i;
const TRANSACTION_END = /^\s*(?:COMMIT|END|ROLLBACK\b(?!\s+TO\b))/i;

/**
 * slonik's pg driver, running the texts `statements` names as prepared statements. A stale one is
 * renamed (prepared afresh on its next use). Outside a transaction the query is run once more
 * unnamed; inside one the refusal has already failed the transaction, so its error is the
 * transaction's, as any error there is.
 */
function preparingDriverFactory(statements: StatementNames): DriverFactory {
  const pgDriverFactory = createPgDriverFactory();
  return async (setup) => {
    const driver = await pgDriverFactory(setup);
    return {
      async createClient() {
        const client = await driver.createClient();
        let inTransaction = false;
        const run = async (text: string, values: readonly unknown[] | undefined) => {
          const name = statements.nameOf(text);
          if (name === undefined) return client.query(text, values as unknown[]);
          try {
            // node-postgres takes a query config where slonik's driver passes the text.
            return await client.query({ name, text } as unknown as string, values as unknown[]);
          } catch (error) {
            if (!staleStatement(error)) throw error;
            statements.retire(text);
            if (inTransaction) throw error;
            return client.query(text, values as unknown[]);
          }
        };
        return {
          ...client,
          async query(text, values) {
            if (TRANSACTION_END.test(text)) inTransaction = false;
            const result = await run(text, values);
            if (TRANSACTION_START.test(text)) inTransaction = true;
            return result;
          },
        };
      },
    };
  };
}

/** At the pool's end, a statement still running on a connection is given this long before its connection closes. */
const STATEMENT_GRACE_MS = 5_000;

/**
 * A driver whose connections close after the statement running on them, however it ends. slonik's
 * own wait for it fails with that statement's error when it fails meanwhile (a deadlock, a
 * cancellation): the pool's end then rejects and the connection stays open. Here the statement is
 * waited for (up to {@link STATEMENT_GRACE_MS}), its outcome left to its caller, and slonik's wait
 * is turned off (`gracefulTerminationTimeout: 0`); one still running after the grace fails as its
 * connection closes.
 */
function closingAfterStatements(factory: DriverFactory): DriverFactory {
  return async (setup) => {
    const driver = await factory(setup);
    return {
      async createClient() {
        const client = await driver.createClient();
        let running: Promise<unknown> | undefined;
        return {
          ...client,
          async query(text, values) {
            const statement = client.query(text, values);
            running = statement;
            try {
              return await statement;
            } finally {
              if (running === statement) running = undefined;
            }
          },
          async destroy() {
            if (running) await within(running, STATEMENT_GRACE_MS);
            return client.destroy();
          },
        };
      },
    };
  };
}

export interface PoolOptions {
  readonly maximumPoolSize: number;
}

export async function createDatabasePool(connectionUri: string, options: PoolOptions): Promise<DatabasePool> {
  return createPool(connectionUri, {
    maximumPoolSize: options.maximumPoolSize,
    driverFactory: closingAfterStatements(preparingDriverFactory(createStatementNames({ minUses: 3, capacity: 200 }))),
    gracefulTerminationTimeout: 0,
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
