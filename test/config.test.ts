/**
 * Configuration from the environment:
 * 1. defaults: port 3000, host 127.0.0.1, ./data, PUBLIC_URL from host and port, level info, a
 *    server process per core.
 * 2. explicit values are taken and PUBLIC_URL loses a trailing slash; Telnyx's credentials come
 *    together or not at all, its webhook key on its own; Plivo's auth id needs its token, the
 *    token alone checks webhook signatures.
 * 3. transcription: OPENAI_API_KEY alone is OpenAI's realtime transcription; a base URL of one's
 *    own (with its model) is batch and never gets OpenAI's key; Azure's three variables together.
 * 4. each bad value fails with one line naming the variable, and never echoes a password.
 * 5. the server entry exits 1 with that line on a bad value.
 */
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import t from 'tap';
import { loadConfig, ConfigError } from '../runtime/config.js';

t.test('defaults', async (t) => {
  const config = loadConfig({});
  t.equal(config.port, 3000);
  t.equal(config.host, '127.0.0.1');
  t.equal(config.dataDir, resolve('data'));
  t.equal(config.databaseUrl, undefined);
  t.equal(config.elasticsearchUrl, undefined);
  t.equal(config.adminToken, undefined);
  t.equal(config.publicUrl, 'http://127.0.0.1:3000');
  t.equal(config.logLevel, 'info');
  t.equal(config.workers, availableParallelism(), 'a server process per core');
  t.equal(config.workerPoolSize, Math.max(1, Math.floor(availableParallelism() / config.workers)), 'the cores shared among them for worker threads');
  t.equal(loadConfig({ WORKERS: '1' }).workerPoolSize, availableParallelism(), 'one server process has every core for its threads');
  t.equal(config.shutdownGraceMs, 30_000, 'a stop gives live calls 30 s');
  t.same(config.callPresence, { heartbeatMs: 1_000, orphanAfterMs: 30_000, sweepMs: 10_000 }, 'heartbeat every second; a call unvouched for 30 s is swept, sweeps 10 s apart');
  t.equal(config.voiceVad, 'energy', 'the energy VAD unless VOICE_VAD=silero');
  t.same(config.campaigns, { callsPerSecond: 5, tickMs: 1_000, leaseMs: 60_000 }, "campaigns start at most 5 calls a second per owner; the dialler ticks every second; a lapsed claim returns after a minute");
  t.same(loadConfig({ CAMPAIGN_CALLS_PER_SECOND: '20', CAMPAIGN_TICK_MS: '250', CAMPAIGN_LEASE_MS: '5000' }).campaigns, { callsPerSecond: 20, tickMs: 250, leaseMs: 5_000 });
  t.equal(loadConfig({ VOICE_VAD: 'silero' }).voiceVad, 'silero');
});

t.test('explicit values', async (t) => {
  const config = loadConfig({
    PORT: '8080',
    HOST: '0.0.0.0',
    DATA_DIR: '/tmp/ap',
    DATABASE_URL: 'postgres://u:p@db:5432/app',
    ELASTICSEARCH_URL: 'http://es:9200',
    ADMIN_TOKEN: 'a-long-enough-admin-token',
    PUBLIC_URL: 'https://voice.example.com/',
    LOG_LEVEL: 'debug',
  });
  t.match(config, { port: 8080, host: '0.0.0.0', dataDir: '/tmp/ap', databaseUrl: 'postgres://u:p@db:5432/app', elasticsearchUrl: 'http://es:9200', publicUrl: 'https://voice.example.com', logLevel: 'debug' });
  t.equal(loadConfig({ PORT: '4000', HOST: 'localhost' }).publicUrl, 'http://localhost:4000');
});

t.test('Telnyx: key, account and TeXML connection together, with the webhook key unless unsigned webhooks are accepted', async (t) => {
  t.same([loadConfig({}).telnyx, loadConfig({}).telnyxPublicKey, loadConfig({}).acceptUnsignedCarrierWebhooks], [undefined, undefined, false], 'without them the loopback carrier, unsigned webhooks refused');
  const publicKey = Buffer.alloc(32, 7).toString('base64');
  const telnyx = { TELNYX_API_KEY: 'KEY0123_abc', TELNYX_ACCOUNT_SID: '0f5a2c3e-6a1b-4c7d-9e8f-0123456789ab', TELNYX_CONNECTION_ID: '1773070540731319841' };
  t.same(loadConfig({ ...telnyx, TELNYX_PUBLIC_KEY: publicKey }).telnyx, { apiKey: 'KEY0123_abc', accountSid: telnyx.TELNYX_ACCOUNT_SID, connectionId: telnyx.TELNYX_CONNECTION_ID, apiUrl: 'https://api.telnyx.com' });
  t.equal(loadConfig({ ...telnyx, TELNYX_PUBLIC_KEY: publicKey, TELNYX_API_URL: 'http://127.0.0.1:9000/' }).telnyx?.apiUrl, 'http://127.0.0.1:9000');
  t.equal(loadConfig({ TELNYX_PUBLIC_KEY: publicKey }).telnyxPublicKey, publicKey);
  t.throws(() => loadConfig(telnyx), /^Invalid TELNYX_PUBLIC_KEY: must be set with TELNYX_API_KEY: Telnyx's webhooks are checked with it/, 'a carrier whose webhooks could not be checked');
  const unsigned = loadConfig({ ...telnyx, ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: 'true' });
  t.same([unsigned.telnyx?.apiKey, unsigned.telnyxPublicKey, unsigned.acceptUnsignedCarrierWebhooks], ['KEY0123_abc', undefined, true], 'unless the operator takes them unsigned');
});

t.test('Plivo: auth id and token together; the token alone checks signatures', async (t) => {
  t.same([loadConfig({}).plivo, loadConfig({}).plivoAuthToken], [undefined, undefined], 'without them the loopback carrier, unsigned webhooks refused');
  t.same(loadConfig({ PLIVO_AUTH_ID: 'MAXXXXXXXXXXXXXXXXXX', PLIVO_AUTH_TOKEN: 'secret' }).plivo, { authId: 'MAXXXXXXXXXXXXXXXXXX', authToken: 'secret', apiUrl: 'https://api.plivo.com' });
  t.equal(loadConfig({ PLIVO_AUTH_ID: 'MA1', PLIVO_AUTH_TOKEN: 'secret', PLIVO_API_URL: 'http://127.0.0.1:9000/' }).plivo?.apiUrl, 'http://127.0.0.1:9000');
  const tokenOnly = loadConfig({ PLIVO_AUTH_TOKEN: 'secret' });
  t.same([tokenOnly.plivo, tokenOnly.plivoAuthToken], [undefined, 'secret']);
});

t.test('transcription: OpenAI with its key, or a server of one\'s own by its base URL; Azure OpenAI by its deployment', async (t) => {
  t.equal(loadConfig({}).speech.openaiTranscribe, undefined, 'none without a key or a base URL: the dev transcriber');
  t.same(loadConfig({ OPENAI_API_KEY: 'sk-1' }).speech.openaiTranscribe, { url: 'https://api.openai.com/v1', apiKey: 'sk-1', model: 'gpt-4o-mini-transcribe', mode: 'realtime', realtimeUrl: 'wss://api.openai.com/v1/realtime' }, 'OPENAI_API_KEY alone: realtime transcription');
  t.match(loadConfig({ OPENAI_API_KEY: 'sk-1', OPENAI_TRANSCRIBE_API_KEY: 'sk-2', OPENAI_TRANSCRIBE_MODEL: 'whisper-1' }).speech.openaiTranscribe, { apiKey: 'sk-2', model: 'whisper-1', mode: 'batch' }, 'a key of its own; whisper-1 is batch');
  t.match(loadConfig({ OPENAI_API_KEY: 'sk-1', OPENAI_TRANSCRIBE_MODE: 'batch' }).speech.openaiTranscribe, { model: 'gpt-4o-mini-transcribe', mode: 'batch' });
  const own = loadConfig({ OPENAI_API_KEY: 'sk-1', OPENAI_TRANSCRIBE_BASE_URL: 'http://speaches:8000/v1/', OPENAI_TRANSCRIBE_MODEL: 'Systran/faster-whisper-small' }).speech.openaiTranscribe;
  t.same(own, { url: 'http://speaches:8000/v1', model: 'Systran/faster-whisper-small', mode: 'batch', realtimeUrl: 'ws://speaches:8000/v1/realtime' }, "a server of one's own gets no key it was not given with");
  t.equal(loadConfig({ OPENAI_TRANSCRIBE_BASE_URL: 'http://whisper:8080/v1', OPENAI_TRANSCRIBE_MODEL: 'whisper-1', OPENAI_TRANSCRIBE_API_KEY: 'local' }).speech.openaiTranscribe?.apiKey, 'local');
  t.throws(() => loadConfig({ OPENAI_TRANSCRIBE_BASE_URL: 'http://speaches:8000/v1' }), /^Invalid OPENAI_TRANSCRIBE_MODEL: must be set with OPENAI_TRANSCRIBE_BASE_URL/);
  t.throws(() => loadConfig({ OPENAI_API_KEY: 'sk-1', OPENAI_TRANSCRIBE_MODE: 'stream' }), /^Invalid OPENAI_TRANSCRIBE_MODE: expected one of batch, realtime/);
  t.same(loadConfig({ AZURE_OPENAI_ENDPOINT: 'https://res.openai.azure.com/', AZURE_OPENAI_API_KEY: 'az', AZURE_OPENAI_TRANSCRIBE_DEPLOYMENT: 'whisper' }).speech.azureTranscribe, { endpoint: 'https://res.openai.azure.com', apiKey: 'az', deployment: 'whisper', apiVersion: '2024-06-01' });
  t.throws(() => loadConfig({ AZURE_OPENAI_ENDPOINT: 'https://res.openai.azure.com', AZURE_OPENAI_API_KEY: 'az' }), /^Invalid AZURE_OPENAI_TRANSCRIBE_DEPLOYMENT: must be set with AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY$/);
});

t.test('bad values name the variable', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'abc' }, /^Invalid PORT: expected an integer from 0 to 65535, got "abc"$/],
    [{ PORT: '70000' }, /^Invalid PORT/],
    [{ HOST: 'bad host' }, /^Invalid HOST/],
    [{ DATABASE_URL: 'mysql://x' }, /^Invalid DATABASE_URL: expected a postgres: or postgresql: URL/],
    [{ DATABASE_URL: 'nonsense' }, /^Invalid DATABASE_URL: expected a URL/],
    [{ ELASTICSEARCH_URL: 'ftp://x' }, /^Invalid ELASTICSEARCH_URL/],
    [{ PUBLIC_URL: 'voice.example.com' }, /^Invalid PUBLIC_URL/],
    [{ LOG_LEVEL: 'loud' }, /^Invalid LOG_LEVEL: expected one of fatal, error, warn, info, debug, trace, silent/],
    [{ ADMIN_TOKEN: 'short' }, /^Invalid ADMIN_TOKEN: must be at least 16 characters/],
    [{ WORKER_POOL_SIZE: '0' }, /^Invalid WORKER_POOL_SIZE/],
    [{ WORKERS: '0' }, /^Invalid WORKERS/],
    [{ SHUTDOWN_GRACE_SECONDS: '-1' }, /^Invalid SHUTDOWN_GRACE_SECONDS: expected an integer from 0 to 3600/],
    [{ CALL_HEARTBEAT_MS: '10' }, /^Invalid CALL_HEARTBEAT_MS: expected an integer from 100 to 60000/],
    [{ CALL_HEARTBEAT_MS: '1000', CALL_ORPHAN_AFTER_MS: '2000' }, /^Invalid CALL_ORPHAN_AFTER_MS: must be at least three heartbeats \(3 × CALL_HEARTBEAT_MS = 3000\), got "2000"$/],
    [{ CALL_SWEEP_MS: 'often' }, /^Invalid CALL_SWEEP_MS/],
    [{ CAMPAIGN_CALLS_PER_SECOND: '0' }, /^Invalid CAMPAIGN_CALLS_PER_SECOND: expected an integer from 1 to 100, got "0"$/],
    [{ CAMPAIGN_TICK_MS: '10' }, /^Invalid CAMPAIGN_TICK_MS/],
    [{ TELNYX_API_KEY: 'KEY0123_abc', TELNYX_CONNECTION_ID: '1773070540731319841' }, /^Invalid TELNYX_ACCOUNT_SID: must be set with TELNYX_API_KEY and TELNYX_CONNECTION_ID$/],
    [{ TELNYX_API_KEY: 'k', TELNYX_ACCOUNT_SID: 'a', TELNYX_CONNECTION_ID: 'c', TELNYX_API_URL: 'ftp://x' }, /^Invalid TELNYX_API_URL/],
    [{ ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: 'sometimes' }, /^Invalid ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: expected true or false/],
    [{ TELNYX_PUBLIC_KEY: Buffer.alloc(31).toString('base64') }, /^Invalid TELNYX_PUBLIC_KEY: expected an Ed25519 public key: 32 bytes in base64$/],
    [{ PLIVO_AUTH_ID: 'MAXXXXXXXXXXXXXXXXXX' }, /^Invalid PLIVO_AUTH_TOKEN: must be set with PLIVO_AUTH_ID$/],
    [{ PLIVO_AUTH_ID: 'MA1', PLIVO_AUTH_TOKEN: 'x', PLIVO_API_URL: 'ftp://x' }, /^Invalid PLIVO_API_URL/],
    [{ VOICE_VAD: 'neural' }, /^Invalid VOICE_VAD: expected one of energy, silero, got "neural"$/],
  ];
  for (const [env, pattern] of cases) {
    const error = (() => {
      try {
        loadConfig(env);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    t.type(error, ConfigError, JSON.stringify(env));
    t.match((error as Error).message, pattern);
    t.notMatch((error as Error).message, /\n/);
  }
  t.throws(() => loadConfig({ DATABASE_URL: 'mysql://user:hunter2@db/app' }), { message: /user:\*\*\*@/ });
});

t.test('the entry point stops with one line', async (t) => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'api/main.ts'], { env: { ...process.env, PORT: 'nope' }, encoding: 'utf8' });
  t.equal(run.status, 1);
  t.equal(run.stderr.trim(), 'Invalid PORT: expected an integer from 0 to 65535, got "nope"');
});
