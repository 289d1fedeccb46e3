import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { startPlatform, type RunningPlatform } from '../../api/platform.js';
import type { RuntimeOptions } from '../../runtime/platform.js';
import { loadConfig, type Config } from '../../runtime/config.js';
import { createLogger } from '../../runtime/logger.js';
import { freshDatabase } from './database.js';
import { fakeResolver } from './resolver.js';
import { ContractChecker } from './contract.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface ApiResult<T = any> {
  readonly status: number;
  readonly body: T;
  readonly headers: Headers;
}

export interface RequestOptions {
  readonly body?: unknown;
  readonly token?: string;
  readonly headers?: Record<string, string>;
  /** Sent as is (string or bytes) instead of JSON. */
  readonly raw?: string | Uint8Array | FormData;
}

export interface TestPlatform {
  readonly platform: RunningPlatform;
  readonly config: Config;
  readonly databaseUrl: string;
  /** `http://127.0.0.1:PORT` */
  readonly origin: string;
  /**
   * Calls `{origin}/api{path}` (or `{origin}{path}` when the path starts with `//`). Every answer is
   * checked against the server's OpenAPI document (`helpers/contract.ts`): an answer it does not
   * describe rejects with a ContractViolation that names the operation, status and field.
   */
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<ApiResult<T>>;
  /** Registers a user and returns its session token and id. */
  user(name?: string): Promise<{ id: number; token: string; email: string }>;
  /** Credits a user's balance through the admin operation. */
  credit(userId: number, amount: number): Promise<void>;
  /** Creates a minimal pipeline assistant (fields overridable) and returns its id and uuid. */
  assistant(token: string, fields?: Record<string, unknown>): Promise<{ id: number; uuid: string }>;
  /** Buys a US number from the inventory (the user needs balance) and returns its id and number. */
  phoneNumber(token: string): Promise<{ id: number; number: string }>;
}

/** The fields of a valid pipeline assistant; tests override what they are about. */
export const MINIMAL_ASSISTANT = {
  name: 'Bot',
  voice_id: 1,
  language_id: 1,
  type: 'outbound',
  mode: 'pipeline',
  timezone: 'UTC',
  initial_message: 'Hi',
  system_prompt: 'Help',
  llm_model_id: 1,
} as const;

let counter = 0;

/**
 * A whole platform on an ephemeral port with a database of its own, stopped when the test ends.
 * Requests go over real HTTP. Its log is silent unless `logTo` takes its lines (level info), parsed
 * and as written. The dev voice is the tone (computed at once, so calls on a manual clock keep their
 * timing) unless a test asks for `devVoice: 'espeak'`.
 */
export async function startTestPlatform(t: Test, overrides: Partial<Config> = {}, options: RuntimeOptions = {}, logTo?: (line: Record<string, unknown>, raw: string) => void): Promise<TestPlatform> {
  const databaseUrl = overrides.databaseUrl ?? (await freshDatabase());
  const dataDir = await mkdtemp(join(tmpdir(), 'ap-data-'));
  const config = loadConfig({}, { port: 0, host: '127.0.0.1', dataDir, databaseUrl, adminToken: ADMIN_TOKEN, logLevel: logTo ? 'info' : 'silent', databasePoolSize: 4, workerPoolSize: 1, devVoice: 'tone', ...overrides });
  const logger = logTo ? createLogger(config.logLevel, { write: (line: string) => logTo(JSON.parse(line) as Record<string, unknown>, line) }) : createLogger(config.logLevel);
  // No test asks the real DNS (CI may have none): names resolve only where a test says so.
  const platform = await startPlatform(config, logger, { lookup: fakeResolver({ localhost: ['127.0.0.1'] }), ...options });
  t.teardown(async () => {
    // No grace and no goodbyes (a manual clock would never play them); the calls' ends are still saved.
    await platform.close({ graceMs: 0, hurry: Promise.resolve() });
    await rm(dataDir, { recursive: true, force: true });
  });
  const origin = platform.origin;
  // Read while the server is sure to serve it (a test may stop the server before its first request).
  const contract = new ContractChecker((await (await fetch(`${origin}/api/openapi.json`)).json()) as Record<string, unknown>);

  async function request<T = any>(method: string, path: string, options: RequestOptions = {}): Promise<ApiResult<T>> {
    const headers: Record<string, string> = { ...options.headers };
    let body: string | Uint8Array | FormData | undefined;
    if (options.raw !== undefined) body = options.raw;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    const url = path.startsWith('//') ? `${origin}${path.slice(1)}` : `${origin}/api${path}`;
    const response = await fetch(url, { method, headers, body });
    const text = await response.text();
    let parsed: unknown = text;
    const contentType = response.headers.get('content-type') ?? '';
    if (contentType.includes('json') && text !== '') parsed = JSON.parse(text);
    contract.check(method, url, response.status, contentType, parsed);
    return { status: response.status, body: parsed as T, headers: response.headers };
  }

  return {
    platform,
    config,
    databaseUrl,
    origin,
    request,
    async user(name = 'Test User') {
      const email = `user${process.pid}-${++counter}-${Date.now()}@example.com`;
      const result = await request('POST', '/auth/register', { body: { name, email, password: 'correct horse battery' } });
      if (result.status !== 201) throw new Error(`register failed: ${result.status} ${JSON.stringify(result.body)}`);
      return { id: result.body.user.id, token: result.body.token, email };
    },
    async assistant(token, fields = {}) {
      const created = await request('POST', '/user/assistant', { token, body: { ...MINIMAL_ASSISTANT, ...fields } });
      if (created.status !== 201) throw new Error(`assistant failed: ${created.status} ${JSON.stringify(created.body)}`);
      const read = await request('GET', `/user/assistant/${created.body.data.id}`, { token });
      return { id: read.body.data.id, uuid: read.body.data.uuid };
    },
    async phoneNumber(token) {
      const offers = await request('GET', '/user/phone-numbers/search?country_code=US', { token });
      const taken = new Set<string>();
      for (const offer of offers.body.data as Array<{ phone_number: string }>) {
        if (taken.has(offer.phone_number)) continue;
        const bought = await request('POST', '/user/phone-numbers/purchase', { token, body: { phone_number: offer.phone_number } });
        if (bought.status !== 200 && bought.status !== 201) continue;
        const all = await request('GET', '/user/phone-numbers/all', { token });
        const row = (all.body.data ?? all.body).find((n: { phone_number: string }) => n.phone_number === offer.phone_number);
        return { id: row.id, number: offer.phone_number };
      }
      throw new Error('no number could be bought');
    },
    async credit(userId, amount) {
      const result = await request('POST', `/admin/users/${userId}/balance`, { token: ADMIN_TOKEN, body: { amount, reason: 'test credit' } });
      if (result.status !== 200) throw new Error(`credit failed: ${result.status} ${JSON.stringify(result.body)}`);
    },
  };
}
