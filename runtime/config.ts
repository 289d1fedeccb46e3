import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { ConfigError, flag, integer, oneOf, text, url, type Env } from './configValues.js';

export { ConfigError } from './configValues.js';

/**
 * The one place that reads the environment. Every variable is validated once at start-up;
 * a bad value throws a ConfigError whose message is a single line naming the variable.
 */

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export interface Config {
  /** TCP port of the HTTP/WebSocket server; 0 picks a free one. @defaultValue 3000 */
  readonly port: number;
  /** Interface the server binds to. @defaultValue '127.0.0.1' */
  readonly host: string;
  /** Directory for the embedded database, call recordings and voice previews (absolute). @defaultValue './data' */
  readonly dataDir: string;
  /** External PostgreSQL; when absent an embedded PostgreSQL is started under dataDir. */
  readonly databaseUrl: string | undefined;
  /** Elasticsearch endpoint; when absent search runs on PostgreSQL. */
  readonly elasticsearchUrl: string | undefined;
  /** Bearer token for /api/admin operations; when absent those routes do not exist. */
  readonly adminToken: string | undefined;
  /**
   * Externally visible origin, no trailing slash. Used for pagination links, webhook and
   * recording URLs. @defaultValue `http://HOST:PORT`
   */
  readonly publicUrl: string;
  /** Bearer token required by GET /metrics; when absent it answers only requests from this machine (loopback, not forwarded). */
  readonly metricsToken: string | undefined;
  /** METRICS_BUSINESS: /metrics also shows business figures (ledger debits in USD by kind). @defaultValue false */
  readonly metricsBusiness: boolean;
  /** pino level. @defaultValue 'info' */
  readonly logLevel: LogLevel;
  /** Largest JSON/urlencoded request body in bytes. @defaultValue 1 MiB */
  readonly jsonBodyLimit: number;
  /** Largest multipart request body in bytes (20 MiB file plus form fields). @defaultValue 21 MiB */
  readonly multipartBodyLimit: number;
  /** Session token lifetime in milliseconds. @defaultValue 30 days */
  readonly sessionTtlMs: number;
  /**
   * Server processes sharing the port and the database (WORKERS); above 1 a supervisor process
   * runs the embedded database and the migrations once and starts them. @defaultValue number of cores
   */
  readonly workers: number;
  /** Threads in the CPU worker pool of each server process. @defaultValue the cores shared among the server processes (at least 1) */
  readonly workerPoolSize: number;
  /** Connections in the database pool. @defaultValue 10 */
  readonly databasePoolSize: number;
  /** Fetch user-supplied URLs that resolve to private or loopback addresses. @defaultValue false */
  readonly outboundAllowPrivate: boolean;
  /** Hosts exempt from the private-address refusal. */
  readonly outboundAllowHosts: readonly string[];
  /** OpenAI-compatible embeddings endpoint; the built-in local embedder when absent. */
  readonly embeddings: { readonly baseUrl: string; readonly apiKey: string | undefined; readonly model: string } | undefined;
  /**
   * OpenAI-compatible chat providers by the name the model catalog uses (`openai`, `groq`), from
   * `<NAME>_API_KEY` and `<NAME>_BASE_URL`. A model whose provider is absent runs on `dev`.
   */
  readonly llmProviders: Readonly<Record<string, { readonly baseUrl: string; readonly apiKey: string | undefined }>>;
  /** Public conversation endpoints: requests per client IP and messages per conversation. */
  readonly rateLimits: {
    readonly perIp: { readonly capacity: number; readonly perMinute: number };
    readonly perConversation: { readonly capacity: number; readonly perMinute: number };
  };
  /** Delays before webhook attempts 2..8 in milliseconds (tests shorten them). @defaultValue 30 s ... 6 h */
  readonly webhookRetryDelaysMs: readonly number[] | undefined;
  /**
   * WEBHOOK_SECRET_OVERLAP_HOURS: after a webhook secret is rotated, deliveries are signed with the
   * new and the previous secret for this long (0: the previous stops at once). @defaultValue 24 h
   */
  readonly webhookSecretOverlapMs: number;
  /**
   * WEBHOOK_LEGACY_SIGNATURE: deliveries also carry the project's former signature headers
   * (`X-Webhook-Id`, `X-Webhook-Timestamp`, `X-Webhook-Signature: v1=<hex>`) beside the Standard
   * Webhooks ones, so receivers written for them go on working while they move. @defaultValue true
   */
  readonly webhookLegacySignature: boolean;
  /** Documents ingested at once per process. @defaultValue 2 */
  readonly ingestionConcurrency: number;
  /**
   * Proxies in front of the server (a TLS terminator, a load balancer) whose X-Forwarded-For
   * entries are believed: the client address for rate limits is that many hops back. @defaultValue 0
   */
  readonly trustProxy: number;
  /** How long a claimed ingestion job is leased before another process may take it over. @defaultValue 120 000 ms */
  readonly ingestionLeaseMs: number;
  /** Extra postgres `-c` settings for the embedded server (tests turn fsync off). */
  readonly embeddedPostgresSettings: Readonly<Record<string, string>>;
  /** TWILIO_ACCOUNT_SID + TWILIO_AUTH_TOKEN (+ TWILIO_API_URL): outbound calls through Twilio; without them the loopback carrier. */
  readonly twilio: { readonly accountSid: string; readonly authToken: string; readonly apiUrl: string } | undefined;
  /** TWILIO_AUTH_TOKEN: when set, Twilio webhooks must carry a valid `X-Twilio-Signature`. */
  readonly twilioAuthToken: string | undefined;
  /**
   * TELNYX_API_KEY + TELNYX_ACCOUNT_SID + TELNYX_CONNECTION_ID (+ TELNYX_API_URL): calls through
   * Telnyx's TeXML API (all three or none); without them the loopback carrier.
   */
  readonly telnyx: { readonly apiKey: string; readonly accountSid: string; readonly connectionId: string; readonly apiUrl: string } | undefined;
  /**
   * TELNYX_PUBLIC_KEY: the account's Ed25519 public key, base64 as Telnyx's portal shows it; when
   * set, Telnyx webhooks must carry a valid `telnyx-signature-ed25519` at most 5 minutes old.
   */
  readonly telnyxPublicKey: string | undefined;
  /**
   * VONAGE_APPLICATION_ID + VONAGE_PRIVATE_KEY (+ VONAGE_API_URL): calls through Vonage's Voice API
   * (both or neither); without them the loopback carrier. The key is the application's RSA private
   * key, as PEM text or the path of the PEM file Vonage's dashboard downloads.
   */
  readonly vonage: { readonly applicationId: string; readonly privateKey: KeyObject; readonly apiUrl: string } | undefined;
  /** VONAGE_SIGNATURE_SECRET: when set, Vonage webhooks must carry a valid signed JWT (HS256) at most 5 minutes old. */
  readonly vonageSignatureSecret: string | undefined;
  /** PLIVO_AUTH_ID + PLIVO_AUTH_TOKEN (+ PLIVO_API_URL): calls through Plivo's Call API; without them the loopback carrier. */
  readonly plivo: { readonly authId: string; readonly authToken: string; readonly apiUrl: string } | undefined;
  /** PLIVO_AUTH_TOKEN: when set, Plivo's webhooks must carry a valid `X-Plivo-Signature-V3` (with its nonce). */
  readonly plivoAuthToken: string | undefined;
  /**
   * ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: a carrier's webhooks without its signing secret set
   * (TWILIO_AUTH_TOKEN, TELNYX_PUBLIC_KEY, VONAGE_SIGNATURE_SECRET, PLIVO_AUTH_TOKEN) are taken
   * unsigned instead of refused (403). Only for a carrier simulator on a closed network: anyone who
   * can reach the server could start calls to an owner's numbers on their balance, or end calls.
   * Telnyx or Vonage configured without its key is a start-up error unless this is set.
   * @defaultValue false
   */
  readonly acceptUnsignedCarrierWebhooks: boolean;
  /** Speech vendors with a key (DEEPGRAM_*, ELEVENLABS_*, OPENAI_* for TTS, transcription and realtime, AZURE_OPENAI_* for transcription); others are served by `dev`. */
  readonly speech: SpeechVendors;
  /** CALCOM_API_URL: the Cal.com API for the calendar tool. @defaultValue https://api.cal.com */
  readonly calendarApiUrl: string;
  /**
   * SHUTDOWN_GRACE_SECONDS: at a stop, how long live calls and replies may go on by themselves
   * before the rest are ended (with a goodbye); a second signal skips it. @defaultValue 30 000 ms
   */
  readonly shutdownGraceMs: number;
  /**
   * CALL_HEARTBEAT_MS, CALL_ORPHAN_AFTER_MS, CALL_SWEEP_MS: how often a process vouches for its live
   * calls, how long a call nobody vouched for is taken for left by a stopped process, and how often
   * the sweep that ends such calls runs. @defaultValue 1 000, 30 000, 10 000 ms
   */
  readonly callPresence: { readonly heartbeatMs: number; readonly orphanAfterMs: number; readonly sweepMs: number };
  /**
   * VOICE_VAD: how a caller's speech is told from silence and noise. `energy`: loudness over an
   * adaptive noise floor (no model; any loud sound counts). `silero`: the Silero v5 neural VAD,
   * batched for every call of the process in one worker thread; it ignores coughs, knocks and
   * noise, and falls back to `energy` for a call while it has no recent answer. @defaultValue 'energy'
   */
  readonly voiceVad: 'energy' | 'silero';
  /**
   * DEV_VOICE: what the `dev` synthesizer (every voice whose vendor has no key) sounds like.
   * `espeak`: the words, spoken by espeak-ng (shipped in npm, offline) in a worker thread, in the
   * voice's language. `tone`: a speech-like tone of the length the words would take, computed at
   * once (tests of call timing use it). @defaultValue 'espeak'
   */
  readonly devVoice: 'espeak' | 'tone';
  /**
   * The campaigns' dialler, which every server process runs. CAMPAIGN_CALLS_PER_SECOND: the most
   * campaign calls started per second for one owner, across all their campaigns and all processes
   * (a token bucket in PostgreSQL holding at most one second's worth; 1-100). CAMPAIGN_TICK_MS: how
   * often each process looks for leads to dial and outcomes to settle. CAMPAIGN_LEASE_MS: how long
   * a lead claimed by a process that stops before its call exists waits before it is dialled again.
   * @defaultValue 5 calls per second, 1 000 ms, 60 000 ms
   */
  readonly campaigns: { readonly callsPerSecond: number; readonly tickMs: number; readonly leaseMs: number };
  /**
   * Messaging channels. WHATSAPP_API_URL: the Graph API's origin; WHATSAPP_API_VERSION: its version
   * path segment. CHANNEL_SECRETS_KEY: the 32-byte key (64 hex digits or base64) that seals the
   * channels' secrets in the database; without it a key made once in DATA_DIR/channel-secrets.key
   * (every process and machine on one database must share it). @defaultValue
   * https://graph.facebook.com, v21.0, the key file
   */
  readonly channels: { readonly whatsappApiUrl: string; readonly whatsappApiVersion: string; readonly secretsKey: Buffer | undefined };
}

export interface SpeechVendors {
  /** `keepAliveMs`: how long an idle stream waits before telling Deepgram it is alive (default 5 s; it closes streams silent for 10 s). */
  readonly deepgram?: { readonly apiKey: string; readonly url: string; readonly keepAliveMs?: number };
  readonly elevenlabs?: { readonly apiKey: string; readonly url: string };
  readonly openai?: { readonly apiKey: string; readonly url: string; readonly realtimeUrl: string };
  /**
   * The `openai` transcriber: an OpenAI-compatible `/audio/transcriptions` (OpenAI, Speaches,
   * whisper.cpp's server, vLLM, LocalAI), one request per utterance (`batch`), or OpenAI's realtime
   * transcription streaming interim transcripts (`realtime`, the default for `gpt-4o*-transcribe`).
   * `url` is the API base with its version (`…/v1`); no `apiKey` for a server that asks none.
   */
  readonly openaiTranscribe?: { readonly url: string; readonly apiKey?: string; readonly model: string; readonly mode: 'batch' | 'realtime'; readonly realtimeUrl: string };
  /** The `azure` transcriber: an Azure OpenAI transcription deployment (whisper, gpt-4o-transcribe). */
  readonly azureTranscribe?: { readonly endpoint: string; readonly apiKey: string; readonly deployment: string; readonly apiVersion: string };
}


export const configDefaults = {
  port: 3000,
  host: '127.0.0.1',
  dataDir: './data',
  logLevel: 'info',
  jsonBodyLimit: 1024 * 1024,
  multipartBodyLimit: 21 * 1024 * 1024,
  sessionTtlMs: 30 * 24 * 60 * 60 * 1000,
  databasePoolSize: 10,
  shutdownGraceMs: 30_000,
  voiceVad: 'energy',
  devVoice: 'espeak',
} as const satisfies Partial<Config>;

const LLM_PROVIDER_DEFAULTS: Readonly<Record<string, string>> = {
  openai: 'https://api.openai.com/v1',
  groq: 'https://api.groq.com/openai/v1',
};

function llmProvidersConfig(env: Env): Config['llmProviders'] {
  const providers: Record<string, { baseUrl: string; apiKey: string | undefined }> = {};
  for (const [name, defaultUrl] of Object.entries(LLM_PROVIDER_DEFAULTS)) {
    const prefix = name.toUpperCase();
    const apiKey = text(env, `${prefix}_API_KEY`);
    const baseUrl = url(env, `${prefix}_BASE_URL`, ['http:', 'https:']);
    if (apiKey || baseUrl) providers[name] = { baseUrl: (baseUrl ?? defaultUrl).replace(/\/+$/, ''), apiKey };
  }
  return providers;
}

function twilioConfig(env: Env): Config['twilio'] {
  const accountSid = text(env, 'TWILIO_ACCOUNT_SID');
  const authToken = text(env, 'TWILIO_AUTH_TOKEN');
  if (!accountSid || !authToken) return undefined;
  return { accountSid, authToken, apiUrl: (url(env, 'TWILIO_API_URL', ['https:', 'http:']) ?? 'https://api.twilio.com').replace(/\/+$/, '') };
}

function telnyxConfig(env: Env): Config['telnyx'] {
  const names = ['TELNYX_API_KEY', 'TELNYX_ACCOUNT_SID', 'TELNYX_CONNECTION_ID'] as const;
  const [apiKey, accountSid, connectionId] = names.map((name) => text(env, name));
  if (!apiKey && !accountSid && !connectionId) return undefined;
  // Some but not all: a carrier half configured would place calls it cannot hang up.
  const missing = names.find((name) => !text(env, name));
  if (missing) throw new ConfigError(missing, `must be set with ${names.filter((name) => name !== missing).join(' and ')}`);
  return { apiKey: apiKey!, accountSid: accountSid!, connectionId: connectionId!, apiUrl: (url(env, 'TELNYX_API_URL', ['https:', 'http:']) ?? 'https://api.telnyx.com').replace(/\/+$/, '') };
}

/** An Ed25519 public key: 32 bytes in base64. */
function ed25519Key(env: Env, name: string): string | undefined {
  const raw = text(env, name);
  if (raw === undefined) return undefined;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(raw) || Buffer.from(raw, 'base64').length !== 32) throw new ConfigError(name, 'expected an Ed25519 public key: 32 bytes in base64');
  return raw;
}

function vonageConfig(env: Env): Config['vonage'] {
  const applicationId = text(env, 'VONAGE_APPLICATION_ID');
  const key = text(env, 'VONAGE_PRIVATE_KEY');
  if (!applicationId && !key) return undefined;
  // One without the other: a carrier half configured would take numbers it cannot call from.
  if (!applicationId) throw new ConfigError('VONAGE_APPLICATION_ID', 'must be set with VONAGE_PRIVATE_KEY');
  if (!key) throw new ConfigError('VONAGE_PRIVATE_KEY', 'must be set with VONAGE_APPLICATION_ID');
  return { applicationId, privateKey: rsaPrivateKey('VONAGE_PRIVATE_KEY', key), apiUrl: (url(env, 'VONAGE_API_URL', ['https:', 'http:']) ?? 'https://api.nexmo.com').replace(/\/+$/, '') };
}

/** An RSA private key: PEM text (escaped `\n` line breaks allowed, as one-line settings write them), or the path of a PEM file. */
function rsaPrivateKey(name: string, value: string): KeyObject {
  let pem = value;
  if (!value.startsWith('-----BEGIN')) {
    try {
      pem = readFileSync(value, 'utf8');
    } catch (error) {
      // The value is not echoed: it may be a key pasted without its PEM lines.
      throw new ConfigError(name, `expected PEM text or the path of a readable PEM file (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`);
    }
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pem.replace(/\\n/g, '\n'));
  } catch {
    throw new ConfigError(name, 'is not a PEM private key');
  }
  if (key.asymmetricKeyType !== 'rsa') throw new ConfigError(name, `expected an RSA key, got ${key.asymmetricKeyType ?? 'another kind'}`);
  return key;
}

function plivoConfig(env: Env): Config['plivo'] {
  const authId = text(env, 'PLIVO_AUTH_ID');
  const authToken = text(env, 'PLIVO_AUTH_TOKEN');
  // The token alone only checks webhook signatures; the id alone could place no call.
  if (authId && !authToken) throw new ConfigError('PLIVO_AUTH_TOKEN', 'must be set with PLIVO_AUTH_ID');
  if (!authId || !authToken) return undefined;
  return { authId, authToken, apiUrl: (url(env, 'PLIVO_API_URL', ['https:', 'http:']) ?? 'https://api.plivo.com').replace(/\/+$/, '') };
}

function speechConfig(env: Env): SpeechVendors {
  const vendors: { -readonly [K in keyof SpeechVendors]: SpeechVendors[K] } = {};
  const deepgram = text(env, 'DEEPGRAM_API_KEY');
  if (deepgram) vendors.deepgram = { apiKey: deepgram, url: (url(env, 'DEEPGRAM_URL', ['wss:', 'ws:']) ?? 'wss://api.deepgram.com').replace(/\/+$/, '') };
  const elevenlabs = text(env, 'ELEVENLABS_API_KEY');
  if (elevenlabs) vendors.elevenlabs = { apiKey: elevenlabs, url: (url(env, 'ELEVENLABS_URL', ['https:', 'http:']) ?? 'https://api.elevenlabs.io').replace(/\/+$/, '') };
  const openai = text(env, 'OPENAI_API_KEY');
  if (openai) {
    const base = (url(env, 'OPENAI_BASE_URL', ['https:', 'http:']) ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
    vendors.openai = { apiKey: openai, url: base, realtimeUrl: (url(env, 'OPENAI_REALTIME_URL', ['wss:', 'ws:']) ?? `${base.replace(/^http/, 'ws')}/realtime`).replace(/\/+$/, '') };
  }
  const transcribe = openaiTranscribeConfig(env);
  if (transcribe) vendors.openaiTranscribe = transcribe;
  const azure = azureTranscribeConfig(env);
  if (azure) vendors.azureTranscribe = azure;
  return vendors;
}

/** Models OpenAI's realtime transcription takes, which stream their words as they come. */
const REALTIME_TRANSCRIBE_MODEL = /^gpt-4o(-mini)?-transcribe/;

/**
 * OPENAI_TRANSCRIBE_BASE_URL (+ OPENAI_TRANSCRIBE_API_KEY, OPENAI_TRANSCRIBE_MODEL) points the
 * `openai` transcriber at a server of one's own; without it, OpenAI itself (or OPENAI_BASE_URL)
 * with OPENAI_TRANSCRIBE_API_KEY or OPENAI_API_KEY. A key is never sent to a base URL it was not
 * given with.
 */
function openaiTranscribeConfig(env: Env): SpeechVendors['openaiTranscribe'] {
  const ownUrl = url(env, 'OPENAI_TRANSCRIBE_BASE_URL', ['https:', 'http:']);
  const apiKey = ownUrl ? text(env, 'OPENAI_TRANSCRIBE_API_KEY') : text(env, 'OPENAI_TRANSCRIBE_API_KEY') ?? text(env, 'OPENAI_API_KEY');
  if (!ownUrl && !apiKey) return undefined;
  const model = text(env, 'OPENAI_TRANSCRIBE_MODEL');
  // A server of one's own serves models by its own names (whisper.cpp's ignores it, but Speaches and vLLM do not).
  if (ownUrl && !model) throw new ConfigError('OPENAI_TRANSCRIBE_MODEL', "must be set with OPENAI_TRANSCRIBE_BASE_URL: the model id the server transcribes with (for whisper.cpp's server, any name)");
  const chosen = model ?? 'gpt-4o-mini-transcribe';
  const base = (ownUrl ?? url(env, 'OPENAI_BASE_URL', ['https:', 'http:']) ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
  const mode = oneOf(env, 'OPENAI_TRANSCRIBE_MODE', ['batch', 'realtime'] as const, REALTIME_TRANSCRIBE_MODEL.test(chosen) ? 'realtime' : 'batch');
  return { url: base, ...(apiKey ? { apiKey } : {}), model: chosen, mode, realtimeUrl: `${base.replace(/^http/, 'ws')}/realtime` };
}

/**
 * AZURE_OPENAI_ENDPOINT + AZURE_OPENAI_API_KEY + AZURE_OPENAI_TRANSCRIBE_DEPLOYMENT (all three or
 * none; + AZURE_OPENAI_API_VERSION): the `azure` transcriber on an Azure OpenAI deployment.
 */
function azureTranscribeConfig(env: Env): SpeechVendors['azureTranscribe'] {
  const names = ['AZURE_OPENAI_ENDPOINT', 'AZURE_OPENAI_API_KEY', 'AZURE_OPENAI_TRANSCRIBE_DEPLOYMENT'] as const;
  const endpoint = url(env, names[0], ['https:', 'http:']);
  const [apiKey, deployment] = [text(env, names[1]), text(env, names[2])];
  if (!endpoint && !apiKey && !deployment) return undefined;
  const missing = names.find((name) => !text(env, name));
  if (missing) throw new ConfigError(missing, `must be set with ${names.filter((name) => name !== missing).join(' and ')}`);
  return { endpoint: endpoint!.replace(/\/+$/, ''), apiKey: apiKey!, deployment: deployment!, apiVersion: text(env, 'AZURE_OPENAI_API_VERSION') ?? '2024-06-01' };
}

function callPresenceConfig(env: Env): Config['callPresence'] {
  const heartbeatMs = integer(env, 'CALL_HEARTBEAT_MS', 100, 60_000, 1_000);
  const orphanAfterMs = integer(env, 'CALL_ORPHAN_AFTER_MS', 1_000, 3_600_000, 30_000);
  const sweepMs = integer(env, 'CALL_SWEEP_MS', 100, 600_000, 10_000);
  // Fewer than three heartbeats in the orphan age, and one late heartbeat ends a live call.
  if (orphanAfterMs < 3 * heartbeatMs) throw new ConfigError('CALL_ORPHAN_AFTER_MS', `must be at least three heartbeats (3 × CALL_HEARTBEAT_MS = ${3 * heartbeatMs}), got "${orphanAfterMs}"`);
  return { heartbeatMs, orphanAfterMs, sweepMs };
}

function channelsConfig(env: Env): Config['channels'] {
  const version = text(env, 'WHATSAPP_API_VERSION') ?? 'v21.0';
  if (!/^v\d+\.\d+$/.test(version)) throw new ConfigError('WHATSAPP_API_VERSION', `expected a Graph API version such as v21.0, got "${version}"`);
  const keyText = text(env, 'CHANNEL_SECRETS_KEY');
  let secretsKey: Buffer | undefined;
  if (keyText !== undefined) {
    secretsKey = /^[0-9a-fA-F]{64}$/.test(keyText) ? Buffer.from(keyText, 'hex') : Buffer.from(keyText, 'base64');
    if (secretsKey.length !== 32) throw new ConfigError('CHANNEL_SECRETS_KEY', 'must be 32 bytes, as 64 hex digits or base64 (openssl rand -hex 32)');
  }
  return {
    whatsappApiUrl: (url(env, 'WHATSAPP_API_URL', ['https:', 'http:']) ?? 'https://graph.facebook.com').replace(/\/+$/, ''),
    whatsappApiVersion: version,
    secretsKey,
  };
}

function embeddingsConfig(env: Env): Config['embeddings'] {
  const baseUrl = url(env, 'EMBEDDINGS_BASE_URL', ['http:', 'https:']);
  if (!baseUrl) return undefined;
  return { baseUrl: baseUrl.replace(/\/+$/, ''), apiKey: text(env, 'EMBEDDINGS_API_KEY'), model: text(env, 'EMBEDDINGS_MODEL') ?? 'text-embedding-3-small' };
}

/**
 * Builds the configuration from explicit options, then the environment, then defaults.
 * @throws ConfigError naming the first invalid variable.
 */
export function loadConfig(env: Env = process.env, overrides: Partial<Config> = {}): Config {
  const port = overrides.port ?? integer(env, 'PORT', 0, 65535, configDefaults.port);
  const host = overrides.host ?? text(env, 'HOST') ?? configDefaults.host;
  const workers = overrides.workers ?? integer(env, 'WORKERS', 1, 256, availableParallelism());
  if (!/^[A-Za-z0-9.:\-[\]]+$/.test(host)) throw new ConfigError('HOST', `expected a host name or address, got "${host}"`);

  const logLevel = (overrides.logLevel ?? text(env, 'LOG_LEVEL') ?? configDefaults.logLevel) as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `expected one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  }

  const adminToken = overrides.adminToken ?? text(env, 'ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError('ADMIN_TOKEN', 'must be at least 16 characters long');
  }

  const publicRaw = overrides.publicUrl ?? url(env, 'PUBLIC_URL', ['http:', 'https:']);
  const publicUrl = (publicRaw ?? `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`).replace(/\/+$/, '');

  return signingKeysChecked({
    port,
    host,
    dataDir: resolve(overrides.dataDir ?? text(env, 'DATA_DIR') ?? configDefaults.dataDir),
    databaseUrl: overrides.databaseUrl ?? url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']),
    elasticsearchUrl: overrides.elasticsearchUrl ?? url(env, 'ELASTICSEARCH_URL', ['http:', 'https:']),
    adminToken,
    metricsToken: overrides.metricsToken ?? text(env, 'METRICS_TOKEN'),
    metricsBusiness: overrides.metricsBusiness ?? flag(env, 'METRICS_BUSINESS', false),
    publicUrl,
    logLevel,
    jsonBodyLimit: overrides.jsonBodyLimit ?? configDefaults.jsonBodyLimit,
    multipartBodyLimit: overrides.multipartBodyLimit ?? configDefaults.multipartBodyLimit,
    sessionTtlMs: overrides.sessionTtlMs ?? configDefaults.sessionTtlMs,
    workers,
    workerPoolSize: overrides.workerPoolSize ?? integer(env, 'WORKER_POOL_SIZE', 1, 256, Math.max(1, Math.floor(availableParallelism() / workers))),
    databasePoolSize: overrides.databasePoolSize ?? integer(env, 'DATABASE_POOL_SIZE', 1, 1000, configDefaults.databasePoolSize),
    outboundAllowPrivate: overrides.outboundAllowPrivate ?? flag(env, 'OUTBOUND_ALLOW_PRIVATE', false),
    outboundAllowHosts: overrides.outboundAllowHosts ?? (text(env, 'OUTBOUND_ALLOW_HOSTS') ?? '').split(',').map((h) => h.trim().toLowerCase()).filter(Boolean),
    embeddings: overrides.embeddings ?? embeddingsConfig(env),
    llmProviders: overrides.llmProviders ?? llmProvidersConfig(env),
    webhookRetryDelaysMs: overrides.webhookRetryDelaysMs,
    webhookSecretOverlapMs: overrides.webhookSecretOverlapMs ?? integer(env, 'WEBHOOK_SECRET_OVERLAP_HOURS', 0, 720, 24) * 3_600_000,
    webhookLegacySignature: overrides.webhookLegacySignature ?? flag(env, 'WEBHOOK_LEGACY_SIGNATURE', true),
    rateLimits: overrides.rateLimits ?? {
      perIp: { capacity: 60, perMinute: integer(env, 'RATE_LIMIT_PER_IP_PER_MINUTE', 1, 100_000, 120) },
      perConversation: { capacity: 10, perMinute: integer(env, 'RATE_LIMIT_PER_CONVERSATION_PER_MINUTE', 1, 100_000, 20) },
    },
    ingestionConcurrency: overrides.ingestionConcurrency ?? integer(env, 'INGESTION_CONCURRENCY', 1, 64, 2),
    trustProxy: overrides.trustProxy ?? integer(env, 'TRUST_PROXY', 0, 10, 0),
    ingestionLeaseMs: overrides.ingestionLeaseMs ?? integer(env, 'INGESTION_LEASE_MS', 500, 3_600_000, 120_000),
    embeddedPostgresSettings: overrides.embeddedPostgresSettings ?? {},
    twilio: overrides.twilio ?? twilioConfig(env),
    twilioAuthToken: overrides.twilioAuthToken ?? text(env, 'TWILIO_AUTH_TOKEN'),
    telnyx: overrides.telnyx ?? telnyxConfig(env),
    telnyxPublicKey: overrides.telnyxPublicKey ?? ed25519Key(env, 'TELNYX_PUBLIC_KEY'),
    vonage: overrides.vonage ?? vonageConfig(env),
    vonageSignatureSecret: overrides.vonageSignatureSecret ?? text(env, 'VONAGE_SIGNATURE_SECRET'),
    plivo: overrides.plivo ?? plivoConfig(env),
    plivoAuthToken: overrides.plivoAuthToken ?? text(env, 'PLIVO_AUTH_TOKEN'),
    acceptUnsignedCarrierWebhooks: overrides.acceptUnsignedCarrierWebhooks ?? flag(env, 'ACCEPT_UNSIGNED_CARRIER_WEBHOOKS', false),
    speech: overrides.speech ?? speechConfig(env),
    calendarApiUrl: (overrides.calendarApiUrl ?? url(env, 'CALCOM_API_URL', ['https:', 'http:']) ?? 'https://api.cal.com').replace(/\/+$/, ''),
    shutdownGraceMs: overrides.shutdownGraceMs ?? integer(env, 'SHUTDOWN_GRACE_SECONDS', 0, 3600, configDefaults.shutdownGraceMs / 1000) * 1000,
    callPresence: overrides.callPresence ?? callPresenceConfig(env),
    voiceVad: overrides.voiceVad ?? oneOf(env, 'VOICE_VAD', ['energy', 'silero'] as const, configDefaults.voiceVad),
    devVoice: overrides.devVoice ?? oneOf(env, 'DEV_VOICE', ['espeak', 'tone'] as const, configDefaults.devVoice),
    campaigns: overrides.campaigns ?? {
      callsPerSecond: integer(env, 'CAMPAIGN_CALLS_PER_SECOND', 1, 100, 5),
      tickMs: integer(env, 'CAMPAIGN_TICK_MS', 50, 60_000, 1_000),
      leaseMs: integer(env, 'CAMPAIGN_LEASE_MS', 1_000, 3_600_000, 60_000),
    },
    channels: overrides.channels ?? channelsConfig(env),
  });
}

/**
 * A carrier that places calls takes its webhooks signed only: Telnyx and Vonage keep their signing
 * key apart from their API credentials, and without it their routes would refuse every webhook.
 */
function signingKeysChecked(config: Config): Config {
  if (config.acceptUnsignedCarrierWebhooks) return config;
  if (config.telnyx && !config.telnyxPublicKey) {
    throw new ConfigError('TELNYX_PUBLIC_KEY', "must be set with TELNYX_API_KEY: Telnyx's webhooks are checked with it (Mission Control, Keys & Credentials, Public Key)");
  }
  if (config.vonage && !config.vonageSignatureSecret) {
    throw new ConfigError('VONAGE_SIGNATURE_SECRET', "must be set with VONAGE_APPLICATION_ID: Vonage's webhooks are checked with it (the dashboard's API settings, Signature secret)");
  }
  return config;
}
