import { join } from 'node:path';
import { createApiKeyService } from './apiKeys/service.js';
import { within } from './bounded.js';
import { createAuthService } from './auth/service.js';
import { TokenCache } from './auth/tokenCache.js';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import { prepareDatabase, type PreparedDatabase } from './store/prepare.js';
import { createSweepGate } from './sweeps.js';
import { createDatabasePool, type DatabasePool } from './store/pool.js';
import { ping } from './store/database.js';
import { createAdminService } from './users/admin.js';
import { createKnowledgeService } from './knowledge/service.js';
import { createToolService } from './tools/service.js';
import { createCatalogService } from './catalog/service.js';
import { createVoicePreviews, type VoicePreviews } from './catalog/previews.js';
import { createAssistantService } from './assistants/service.js';
import { createPhoneNumberService } from './phoneNumbers/service.js';
import { createCampaignService } from './campaigns/service.js';
import { createWorkerPool, type WorkerPool } from './workers.js';
import { createCrawler } from './knowledge/crawler.js';
import { createLocalEmbedder, createOpenAiEmbedder, type Embedder } from './knowledge/embedder.js';
import { createIngestion } from './knowledge/ingestion.js';
import { createDestinationCheck, createOutboundFetch, type HostLookup, type OutboundFetch } from './net/outbound.js';
import { createSearchIndex } from './search/index.js';
import { createLlmRegistry } from './llm/registry.js';
import { createConversationEngine, type ConversationEngine } from './conversations/engine.js';
import { createConversationService } from './conversations/service.js';
import { createCallService } from './calls/service.js';
import { createWebhookWorker } from './webhooks/worker.js';
import { createWebhookService } from './webhooks/service.js';
import { createLedgerService, type LedgerService } from './ledger/service.js';
import { createMetrics, type Metrics } from './metrics.js';
import { systemClock, type Clock } from './clock.js';
import { createVoiceService, type VoiceService } from './calls/live.js';
import { createDialler } from './campaigns/dialler.js';
import { createChannels, type Channels } from './channels/index.js';
import { createFileTranscriber } from './voice/providers/fileTranscriber.js';
import { createCarriers } from './calls/carriers/index.js';
import type { Carrier } from './calls/carriers/types.js';
import { createSpeechRegistry, speechAdapters, type SpeechOverrides } from './voice/providers/registry.js';
import { recordingSecret, recordingUrl } from './calls/recording.js';
import { createEvaluator, type Evaluator } from './calls/evaluation.js';
import { callForIndex } from './calls/repository.js';
import { startVad } from './voice/hearing/vad/start.js';
import type { VadSource } from './voice/hearing/vad/vad.js';
import { EspeakSynthesizer } from './voice/providers/espeak.js';
import type { VoiceGender } from './voice/providers/dev.js';

/**
 * The runtime: storage and the domain services, with no knowledge of HTTP. Started before the
 * transport and stopped after it.
 */
export interface Runtime {
  readonly pool: DatabasePool;
  /** The database in use (embedded or DATABASE_URL), for tools that seed it directly. */
  readonly databaseUrl: string;
  readonly metrics: Metrics;
  /** Fetches user-supplied URLs through the outbound guard. */
  readonly outbound: OutboundFetch;
  readonly services: Services;
  /** The voice activity detector of the calls (VOICE_VAD). */
  readonly vad: VadSource;
  wakeWebhooks(): void;
  /** Tells the runtime the origin it listens on (used for stream URLs when PUBLIC_URL is not set). */
  setListeningOrigin(origin: string): void;
  /** The public origin: PUBLIC_URL, or the listening origin. */
  publicUrl(): string;
  /** Where call recordings are and the key that signs their URLs. */
  readonly recordings: { readonly dir: string; readonly secret: Buffer };
  /** `ok` when the database answers within a second, `stopping` once a stop has begun. */
  health(): Promise<'ok' | 'unavailable' | 'stopping'>;
  /** The embedded PostgreSQL's data directory when this process runs it (the database is then its alone). */
  readonly embeddedDirectory: string | undefined;
  /** Stop, step 1: no new call and no new message; live ones go on. */
  drain(): void;
  /** Resolves once no call is live here and no message is being answered (the grace of a stop waits for it). */
  quiet(): Promise<void>;
  /**
   * Resolves once the background work under way has settled: document jobs (every one due has its
   * outcome), webhook attempts (every one due was made), evaluations, and the token uses being
   * recorded. Tests read outcomes after it instead of polling for them.
   */
  settled(): Promise<void>;
  /**
   * Stop, step 3: ends the calls still live (a goodbye of up to `goodbyeMs` where the caller can
   * hear it, unless `cutShort` settles first) and cuts short the replies still being written (refunded); resolves once every end is
   * saved with its charge and webhook.
   */
  endLive(goodbyeMs: number, cutShort?: Promise<void>): Promise<void>;
  /**
   * Stop, last step: background work (webhook attempts in flight finish, evaluations get
   * `graceMs`, document jobs still running are given back), the worker threads, the pool, and
   * then the embedded PostgreSQL.
   */
  stop(graceMs?: number): Promise<void>;
}

export interface Services {
  readonly auth: ReturnType<typeof createAuthService>;
  readonly apiKeys: ReturnType<typeof createApiKeyService>;
  readonly admin: ReturnType<typeof createAdminService>;
  readonly knowledge: ReturnType<typeof createKnowledgeService>;
  readonly tools: ReturnType<typeof createToolService>;
  readonly catalog: ReturnType<typeof createCatalogService>;
  readonly assistants: ReturnType<typeof createAssistantService>;
  readonly phoneNumbers: ReturnType<typeof createPhoneNumberService>;
  /** Outbound campaigns, their leads and the do-not-call list (the API's side; the dialler dials). */
  readonly campaigns: ReturnType<typeof createCampaignService>;
  readonly conversations: ReturnType<typeof createConversationService>;
  /** WhatsApp and SMS channels: their settings, their webhooks' messages, the replies' outbox. */
  readonly channels: Channels;
  readonly calls: ReturnType<typeof createCallService>;
  readonly webhooks: ReturnType<typeof createWebhookService>;
  /** The owners' ledger entries, read. */
  readonly ledger: LedgerService;
  /** Live conversation actors and their event streams (the widget socket subscribes here). */
  readonly conversationEngine: ConversationEngine;
  /** Live calls: creation, media sockets, the call ticker. */
  readonly voice: VoiceService;
  /** Post-call evaluations. */
  readonly evaluator: Evaluator;
  /** Voice samples for the catalog's `preview_url`. */
  readonly voicePreviews: VoicePreviews;
}

/** What tests and benchmarks may replace: time, speech providers, the carrier, the name resolver. */
export interface RuntimeOptions {
  /** The resolver of the outbound guard (tests answer for names they invent). */
  readonly lookup?: HostLookup;
  /** The clock of every timer: calls, conversations, sweeps, polls, heartbeats and lease renewals (see clock.ts). @defaultValue systemClock */
  readonly clock?: Clock;
  readonly speech?: SpeechOverrides;
  readonly carrier?: Carrier;
  /** The longest a conversation's reply may take (tests shorten it). @defaultValue 3 minutes */
  readonly conversationTurnMs?: number;
  /** How long a conversation's turn holds it between renewals (tests shorten it). @defaultValue 60 s */
  readonly conversationTurnLeaseSeconds?: number;
  /** How long a process holds a channel conversation's inbox between renewals (tests shorten it). @defaultValue 60 s */
  readonly channelInboxLeaseSeconds?: number;
  /** How often abandoned channel inboxes are looked for (tests lengthen it). @defaultValue 5 s */
  readonly channelInboxSweepMs?: number;
  /** Waits between attempts to save a call's end, the last repeating (tests shorten them). */
  readonly callEndRetryMs?: readonly number[];
}


/**
 * One server process among several sharing a database another process (the supervisor) prepared:
 * this one neither starts a database nor migrates.
 */
export interface ServerRole {
  /** The process's index among its siblings (0-based): a field of its log lines and a label of its metrics. */
  readonly index: number;
  readonly databaseUrl: string;
  /** The embedded PostgreSQL's data directory, when the supervisor runs it (for the start-up facts). */
  readonly embeddedDirectory: string | undefined;
  /**
   * No sibling serves yet and the database is the supervisor's alone (the embedded one, at its
   * start): every call and message left open was left by the start before, and is settled at once.
   */
  readonly exclusive: boolean;
}

export async function startRuntime(config: Config, logger: Logger, options: RuntimeOptions = {}, role?: ServerRole): Promise<Runtime> {
  const clock = options.clock ?? systemClock;
  const prepared: PreparedDatabase = role
    ? { databaseUrl: role.databaseUrl, embedded: undefined, embeddedDirectory: role.embeddedDirectory }
    : await prepareDatabase(config, logger);
  const { databaseUrl, embedded } = prepared;
  const exclusive = role ? role.exclusive : embedded !== undefined;

  let pool: DatabasePool | undefined;
  try {
    pool = await createDatabasePool(databaseUrl, { maximumPoolSize: config.databasePoolSize });
  } catch (error) {
    await embedded?.stop();
    throw error;
  }
  const db = pool;
  const sweeps = createSweepGate(db, clock, logger);
  const workers: WorkerPool = createWorkerPool(config.workerPoolSize, { onError: (error) => logger.error({ err: error }, 'a worker thread failed between tasks') });
  const outboundPolicy = { allowPrivate: config.outboundAllowPrivate, allowHosts: new Set(config.outboundAllowHosts) };
  const outbound = createOutboundFetch(outboundPolicy, { logger: logger.child({ component: 'outbound' }), lookup: options.lookup });
  const refusesDestination = createDestinationCheck(outboundPolicy, { lookup: options.lookup });
  const embedder: Embedder = config.embeddings ? createOpenAiEmbedder(config.embeddings) : createLocalEmbedder(workers);
  const index = createSearchIndex(config, db, embedder, workers);
  try {
    await index.prepare();
  } catch (error) {
    await workers.close();
    await db.end();
    await embedded?.stop();
    throw error;
  }
  let metrics: Metrics | undefined;
  const ingestion = createIngestion({
    pool: db,
    workers,
    embedder,
    index,
    crawler: createCrawler({ fetch: outbound, workers, now: () => clock.now() }),
    dataDir: config.dataDir,
    logger: logger.child({ component: 'ingestion' }),
    clock,
    concurrency: config.ingestionConcurrency,
    leaseMs: config.ingestionLeaseMs,
    onLeaseLost: () => metrics?.leaseLost('ingestion'),
  });

  const webhookWorker = createWebhookWorker({
    pool: db,
    fetch: outbound,
    logger: logger.child({ component: 'webhooks' }),
    clock,
    retryDelaysMs: config.webhookRetryDelaysMs,
    legacySignature: config.webhookLegacySignature,
    onAttempt: (outcome) => metrics?.webhookAttempt(outcome),
    onLeaseLost: () => metrics?.leaseLost('webhook'),
  });
  const catalog = createCatalogService({ pool: db });
  const knowledge = createKnowledgeService({ pool: db, workers, index, embedder, dataDir: config.dataDir, logger, onEnqueued: () => ingestion.wake() });
  const llm = createLlmRegistry(config, logger);
  const conversationEngine = createConversationEngine({
    pool: db,
    databaseUrl,
    catalog,
    llm,
    knowledge,
    outbound,
    logger: logger.child({ component: 'conversations' }),
    clock,
    turnMs: options.conversationTurnMs,
    turnLeaseSeconds: options.conversationTurnLeaseSeconds,
    sweeps,
  });
  const channels = await createChannels({
    pool: db,
    config,
    engine: conversationEngine,
    clock,
    logger: logger.child({ component: 'channels' }),
    sweeps,
    publicUrl: () => publicUrl(),
    wakeWebhooks: () => webhookWorker.wake(),
    transcribe: createFileTranscriber({ speech: config.speech, catalog, logger: logger.child({ component: 'channels' }) }),
    inboxLeaseSeconds: options.channelInboxLeaseSeconds,
    inboxSweepMs: options.channelInboxSweepMs,
  });
  const recordings = { dir: join(config.dataDir, 'recordings'), secret: await recordingSecret(db, config.dataDir, logger.child({ component: 'calls' })) };
  const signedRecordingUrl = (callId: number) => recordingUrl(publicUrl(), recordings.secret, callId, clock.now());
  let listeningOrigin = config.publicUrl;
  const publicUrl = () => (/:0$/.test(config.publicUrl) ? listeningOrigin : config.publicUrl);
  const voiceLogger = logger.child({ component: 'calls' });
  const vad = await startVad(config.voiceVad, logger.child({ component: 'vad' }));
  const synthesizer = config.devVoice === 'espeak' ? new EspeakSynthesizer(logger.child({ component: 'speech' })) : undefined;
  // Loaded in the background, so the first call's greeting does not wait for it (a failure is logged and the voice hums).
  void synthesizer?.start().catch(() => {});
  const speech = createSpeechRegistry(config, voiceLogger, speechAdapters(config.speech, voiceLogger, (kind, provider, ms) => metrics?.voice.firstByte(kind, provider, ms)), options.speech, {
    synthesizer,
    genderOf: async (voice) => (await catalog.get()).rows.voices.find((row) => row.provider_voice_id === voice)?.gender as VoiceGender | undefined,
  });
  const carriers = createCarriers({ twilio: config.twilio, telnyx: config.telnyx, vonage: config.vonage, plivo: config.plivo && { ...config.plivo, publicUrl } }, voiceLogger, clock, options.carrier);
  const evaluator = createEvaluator({ pool: db, catalog, llm, logger: voiceLogger, clock, onDone: () => webhookWorker.wake(), onLeaseLost: () => metrics?.leaseLost('evaluation') });
  const voice = createVoiceService({
    pool: db,
    catalog,
    llm,
    speech,
    knowledge,
    outbound,
    carriers,
    clock,
    logger: voiceLogger,
    publicUrl,
    calendarBaseUrl: config.calendarApiUrl,
    vad,
    recordingsDir: recordings.dir,
    recordingUrl: signedRecordingUrl,
    metrics: {
      voiceToVoice: (ms) => metrics?.voice.voiceToVoice(ms),
      turn: (mode) => metrics?.voice.turn(mode),
      interruption: (mode) => metrics?.voice.interruption(mode),
      resumed: (mode) => metrics?.voice.resumed(mode),
      firstByte: (kind, provider, ms) => metrics?.voice.firstByte(kind, provider, ms),
      frameLateness: (ms) => metrics?.voice.frameLateness(ms),
      droppedCallerFrame: () => metrics?.voice.droppedCallerFrame(),
    },
    wakeWebhooks: () => webhookWorker.wake(),
    endSaveRetryMs: options.callEndRetryMs,
    evaluate: (callId) => evaluator.evaluate(callId),
    presence: config.callPresence,
    exclusiveDatabase: exclusive,
    sweeps,
    databaseUrl,
    indexCall: async (callId) => {
      const row = await callForIndex(db, callId);
      if (row) await index.indexCall({ id: row.id, userId: row.user_id, assistantId: row.assistant_id, campaignId: row.campaign_id, status: row.status, type: row.type, clientPhoneNumber: row.client_phone_number, createdAt: row.created_at, transcript: row.transcript });
    },
  });
  carriers.reportStatusesTo((report) => voice.carrierStatus(report.carrier, report.callId, report.carrierCallId, report.status));
  const dialler = createDialler({ pool: db, clock, logger: logger.child({ component: 'campaigns' }), voice, ...config.campaigns });
  const tokens = new TokenCache(Date.now);
  let stopping = false;
  const services: Services = {
    auth: createAuthService({ pool: db, logger, sessionTtlMs: config.sessionTtlMs, tokens }),
    apiKeys: createApiKeyService({ pool: db, logger, tokens }),
    admin: createAdminService({ pool: db, logger }),
    knowledge,
    tools: createToolService({ pool: db, logger, refusesDestination }),
    catalog,
    assistants: createAssistantService({ pool: db, catalog, logger, refusesDestination }),
    phoneNumbers: createPhoneNumberService({ pool: db, logger, defaultCarrier: carriers.defaultName }),
    campaigns: createCampaignService({ pool: db, logger }),
    conversations: createConversationService({ pool: db, engine: conversationEngine, logger, replyOnChannel: channels.reply }),
    channels,
    calls: createCallService({
      pool: db,
      recordingUrl: signedRecordingUrl,
      index,
      recordings,
      clock,
      live: (callId) => {
        const session = voice.session(callId);
        return session?.live ? { transcript: session.transcriptText(), answeredAt: session.answeredTime } : undefined;
      },
    }),
    webhooks: createWebhookService({ pool: db, secretOverlapMs: config.webhookSecretOverlapMs, onQueued: () => webhookWorker.wake() }),
    ledger: createLedgerService({ pool: db }),
    conversationEngine,
    voice,
    evaluator,
    voicePreviews: createVoicePreviews({ catalog, tts: speech.tts, dataDir: config.dataDir, devVoice: config.devVoice, logger: logger.child({ component: 'previews' }) }),
  };

  metrics = createMetrics({ pool: db, business: config.metricsBusiness, liveConversations: () => conversationEngine.liveCount(), liveCalls: (mode) => voice.liveCount(mode), worker: role?.index });
  ingestion.start();
  webhookWorker.start();
  dialler.start();
  channels.start();
  void evaluator.resume().catch((error: unknown) => logger.error({ err: error }, 'pending evaluations could not be resumed'));
  const stopEvaluationSweep = sweeps.every('evaluations', 5 * 60_000, () => evaluator.sweep().catch((error: unknown) => logger.error({ err: error }, 'pending evaluations could not be taken up again')));
  // The embedded database is this process's alone: a message still owed its reply was left by the
  // process before it (killed mid-turn), and is refunded at once rather than after the usual wait.
  void conversationEngine.refundUnanswered(exclusive ? 0 : undefined).catch((error: unknown) => logger.error({ err: error }, 'unanswered messages could not be refunded'));
  const renewNumbers = () => services.phoneNumbers.renewDue().catch((error: unknown) => logger.error({ err: error }, 'phone numbers could not be renewed'));
  const stopRenewals = sweeps.every('phone-number-renewals', 60 * 60_000, renewNumbers);
  void renewNumbers();
  logger.info({ searchIndex: index.name, embedder: embedder.model }, 'knowledge ingestion started');

  return {
    pool: db,
    databaseUrl,
    services,
    outbound,
    metrics,
    vad,
    embeddedDirectory: prepared.embeddedDirectory,
    async health() {
      if (stopping) return 'stopping';
      const probe = ping(db).then(
        () => true,
        () => false,
      );
      const timeout = new Promise<boolean>((resolveTimeout) => setTimeout(resolveTimeout, 1000, false).unref());
      return (await Promise.race([probe, timeout])) ? 'ok' : 'unavailable';
    },
    drain() {
      stopping = true;
      dialler.drain();
      voice.drain();
      conversationEngine.drain();
      channels.drain();
      ingestion.drain();
    },
    async quiet() {
      await Promise.all([voice.quiet(), conversationEngine.quiet(), channels.idle()]);
    },
    async settled() {
      // An evaluation's end releases its call's webhook: evaluations first, then what they woke.
      await evaluator.idle();
      await Promise.all([ingestion.idle(), webhookWorker.idle(), services.auth.settled()]);
    },
    async endLive(goodbyeMs, cutShort) {
      await Promise.all([voice.endAll(goodbyeMs, cutShort), conversationEngine.stop(), channels.stop()]);
    },
    /** A call just ended and its webhook was queued: deliver without waiting for the next poll. */
    wakeWebhooks: () => webhookWorker.wake(),
    setListeningOrigin(origin) {
      listeningOrigin = origin;
    },
    publicUrl,
    recordings,
    async stop(graceMs = Infinity) {
      stopping = true;
      stopRenewals();
      stopEvaluationSweep();
      await dialler.stop();
      await voice.stop();
      await vad.close();
      await synthesizer?.close();
      await Promise.all([conversationEngine.stop(), channels.stop()]);
      // Side by side: an attempt in flight finishes (it has its own 10 s limit), an evaluation left
      // unfinished after `graceMs` is given back (taken up again by another process, or at the next
      // start), and a document job still running (it had the whole stop so far) is given back to be run again.
      await Promise.all([webhookWorker.stop(), within(evaluator.idle(), graceMs).then(() => evaluator.release()), ingestion.stop(0)]);
      await workers.close();
      // The pool's end waits for the statements still running (store/pool.ts); should it fail
      // all the same, the stop still goes on to the database's.
      await db.end().catch((error: unknown) => logger.error({ err: error }, 'the database pool could not be closed'));
      await embedded?.stop();
    },
  };
}
