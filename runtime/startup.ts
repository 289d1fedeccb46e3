import type { Config } from './config.js';

/**
 * What the server tells its operator once it listens: where it is, where the API reference is,
 * which providers are the offline `dev` stand-ins (a missing key is visible at once, not in the
 * middle of a call), and the switches that change what it will do.
 */

export interface StartupFacts {
  readonly url: string;
  readonly apiReference: string;
  readonly database: string;
  readonly search: string;
  /** Providers served for real, by what they serve. */
  readonly providers: readonly string[];
  /** Catalog providers served by the offline `dev` stand-ins (no key configured, or no adapter yet). */
  readonly offline: readonly string[];
  /** The carriers with credentials, or the loopback stand-in. */
  readonly carrier: string;
  /** Which carriers' webhooks are taken: signed ones of each carrier with its secret set; unsigned ones only when the operator chose. */
  readonly carrierWebhooks: string;
  /** How callers' speech is told from silence and noise (VOICE_VAD). */
  readonly vad: string;
  /** What the dev voice sounds like (DEV_VOICE). */
  readonly devVoice: string;
  readonly adminRoutes: 'on' | 'off (set ADMIN_TOKEN)';
  readonly outboundPrivateAddresses: 'allowed' | 'refused';
  readonly metrics: 'token required' | 'this machine only (set METRICS_TOKEN)';
  readonly shutdownGraceSeconds: number;
}

/** Catalog providers by what they serve, and whether this configuration has a real adapter for each. */
function providerTable(config: Config): ReadonlyArray<readonly [string, string, boolean]> {
  const { speech, llmProviders } = config;
  return [
    ['chat', 'openai', llmProviders.openai !== undefined],
    ['chat', 'groq', llmProviders.groq !== undefined],
    ['transcription', 'deepgram', speech.deepgram !== undefined],
    ['transcription', 'openai', speech.openaiTranscribe !== undefined],
    ['transcription', 'azure', speech.azureTranscribe !== undefined],
    ['voice', 'elevenlabs', speech.elevenlabs !== undefined],
    ['voice', 'openai', speech.openai !== undefined],
    ['voice', 'azure', false],
    ['realtime', 'openai', speech.openai !== undefined],
  ];
}

/** Whose webhooks the server takes, as an operator should read it before exposing the server. */
function carrierWebhooks(config: Config): string {
  const secrets: ReadonlyArray<readonly [string, string | undefined]> = [
    ['twilio', config.twilioAuthToken],
    ['telnyx', config.telnyxPublicKey],
    ['plivo', config.plivoAuthToken],
    ['vonage', config.vonageSignatureSecret],
  ];
  const signed = secrets.filter(([, secret]) => secret !== undefined).map(([name]) => name);
  const unsigned = secrets.filter(([, secret]) => secret === undefined).map(([name]) => name);
  const parts = signed.length > 0 ? [`signed: ${signed.join(', ')}`] : [];
  if (unsigned.length > 0) parts.push(config.acceptUnsignedCarrierWebhooks ? `UNSIGNED ACCEPTED: ${unsigned.join(', ')} (ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: anyone can post them)` : `refused: ${unsigned.join(', ')} (no signing secret)`);
  return parts.join('; ');
}

export function startupFacts(config: Config, url: string, embeddedDirectory: string | undefined): StartupFacts {
  const carriers = (['twilio', 'telnyx', 'plivo', 'vonage'] as const).filter((name) => config[name] !== undefined);
  const table = providerTable(config);
  const byKind = (live: boolean) => {
    const groups = new Map<string, string[]>();
    for (const [kind, name, real] of table) if (real === live) groups.set(kind, [...(groups.get(kind) ?? []), name]);
    return [...groups].map(([kind, names]) => `${kind}: ${names.join(', ')}`);
  };
  const offline = byKind(false);
  if (!config.embeddings) offline.push('embeddings: built-in local embedder');
  const providers = byKind(true);
  if (config.embeddings) providers.push(`embeddings: ${config.embeddings.model}`);
  return {
    url,
    apiReference: `${url}/api/docs`,
    database: embeddedDirectory ? `embedded PostgreSQL in ${embeddedDirectory}` : 'DATABASE_URL',
    search: config.elasticsearchUrl ? 'Elasticsearch' : 'PostgreSQL',
    providers,
    offline,
    carrier: carriers.length > 0 ? carriers.join(', ') : 'loopback (a local simulated phone answers outbound calls, by the number dialled; set the credentials of Twilio, Telnyx, Plivo or Vonage)',
    carrierWebhooks: carrierWebhooks(config),
    vad: config.voiceVad === 'silero' ? 'silero (neural, in a worker thread)' : 'energy (set VOICE_VAD=silero for the neural one)',
    devVoice: config.devVoice === 'espeak' ? 'espeak-ng (offline speech, in a worker thread)' : 'a tone of the length of the words (set DEV_VOICE=espeak to hear them)',
    adminRoutes: config.adminToken ? 'on' : 'off (set ADMIN_TOKEN)',
    outboundPrivateAddresses: config.outboundAllowPrivate ? 'allowed' : 'refused',
    metrics: config.metricsToken ? 'token required' : 'this machine only (set METRICS_TOKEN)',
    shutdownGraceSeconds: config.shutdownGraceMs / 1000,
  };
}

/** The same facts as lines for a person at a terminal. */
export function startupBlock(facts: StartupFacts): string {
  const lines = [
    `Assistant Platform listening on ${facts.url}`,
    `  API reference      ${facts.apiReference}`,
    `  database           ${facts.database}; search on ${facts.search}`,
    `  providers          ${facts.providers.length > 0 ? facts.providers.join('; ') : 'none configured'}`,
    `  offline stand-ins  ${facts.offline.length > 0 ? `${facts.offline.join('; ')} (the dev providers: no network; answers by rule, not a language model)` : 'none'}`,
    `  carrier            ${facts.carrier}`,
    `  carrier webhooks   ${facts.carrierWebhooks}`,
    `  voice activity     ${facts.vad}`,
    `  dev voice          ${facts.devVoice}`,
    `  admin routes       ${facts.adminRoutes}`,
    `  private addresses  ${facts.outboundPrivateAddresses} for tools, webhooks and crawling`,
    `  metrics            ${facts.metrics}`,
    `  stopping           SIGTERM or Ctrl-C: live calls get ${facts.shutdownGraceSeconds} s to finish (SHUTDOWN_GRACE_SECONDS); a second signal ends them at once`,
  ];
  return `${lines.join('\n')}\n`;
}
