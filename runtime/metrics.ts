import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DatabasePool } from 'slonik';
import { jobQueueDepth } from './knowledge/jobs.js';
import { debitsByKind } from './ledger/repository.js';

/**
 * Prometheus metrics of one process. Counts that the database knows exactly across processes
 * (queue depth, ledger debits) are read from it at scrape time; the rest is observed in process.
 * Node's own metrics (event-loop lag with percentiles, heap, GC) come from prom-client's defaults.
 * Business figures (money: ledger debits) are left out unless `business` asks for them: whoever
 * scrapes operations data need not see revenue.
 */
export function createMetrics(options: {
  pool: DatabasePool;
  /** Also show business figures (METRICS_BUSINESS). */
  business: boolean;
  liveConversations: () => number;
  liveCalls: (mode: 'pipeline' | 'multimodal' | 'dualplex') => number;
  /** The server process's index among its siblings (WORKERS above 1): a `worker` label on every metric. */
  worker?: number;
}) {
  const registry = new Registry();
  if (options.worker !== undefined) registry.setDefaultLabels({ worker: String(options.worker) });
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 10 });

  const httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by route pattern, method and status',
    labelNames: ['route', 'method', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  const sockets = new Gauge({ name: 'open_sockets', help: 'Open WebSockets by kind', labelNames: ['kind'], registers: [registry] });
  const webhookAttempts = new Counter({ name: 'webhook_deliveries_total', help: 'Webhook delivery attempts by outcome', labelNames: ['outcome'], registers: [registry] });
  const leasesLost = new Counter({
    name: 'background_results_dropped_total',
    help: 'Results of background work dropped because another process had taken over its lease, by worker (webhook, ingestion, evaluation)',
    labelNames: ['worker'],
    registers: [registry],
  });
  new Gauge({
    name: 'active_conversations',
    help: 'Conversation actors live in this process',
    registers: [registry],
    collect() {
      this.set(options.liveConversations());
    },
  });
  new Gauge({
    name: 'active_calls',
    help: 'Live calls in this process by engine mode',
    labelNames: ['mode'],
    registers: [registry],
    collect() {
      for (const mode of ['pipeline', 'multimodal', 'dualplex'] as const) this.set({ mode }, options.liveCalls(mode));
    },
  });
  const voiceToVoice = new Histogram({
    name: 'voice_to_voice_added_seconds',
    help: "Time from the caller's last speech frame to the agent's first audio frame, less the end-of-turn silence",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
    registers: [registry],
  });
  const frameLateness = new Histogram({
    name: 'call_audio_frame_lateness_seconds',
    help: "How late each of the agent's 20 ms audio frames left against its schedule (the server's own jitter; above 0.02 the process is not keeping real time)",
    buckets: [0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1],
    registers: [registry],
  });
  const providerTtfb = new Histogram({
    name: 'provider_first_byte_seconds',
    help: 'Time to the first byte of a speech or model provider, by kind (stt, llm, tts, realtime) and provider',
    labelNames: ['kind', 'provider'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 2, 5],
    registers: [registry],
  });
  const droppedCallerFrames = new Counter({
    name: 'call_audio_caller_frames_dropped_total',
    help: 'Caller audio frames dropped because a connection sent audio faster than real time (beyond a 2 s burst)',
    registers: [registry],
  });
  const turns = new Counter({ name: 'call_turns_total', help: 'Caller turns by engine mode', labelNames: ['mode'], registers: [registry] });
  const interruptions = new Counter({ name: 'call_interruptions_total', help: 'Caller barge-ins that stopped the agent, by engine mode', labelNames: ['mode'], registers: [registry] });
  const resumed = new Counter({
    name: 'call_interruptions_resumed_total',
    help: "Times the agent paused for the caller's sound and went on (a backchannel, a cough: no interruption), by engine mode",
    labelNames: ['mode'],
    registers: [registry],
  });
  new Gauge({
    name: 'document_job_queue_depth',
    help: 'Document ingestion jobs pending or running',
    registers: [registry],
    async collect() {
      const row = await jobQueueDepth(options.pool);
      this.set(row.depth);
      oldest.set(row.oldest ?? 0);
    },
  });
  const oldest = new Gauge({ name: 'document_job_queue_oldest_seconds', help: 'Age of the oldest pending or running document job', registers: [registry] });
  if (options.business) businessMetrics(registry, options.pool);

  return {
    registry,
    observeRequest(route: string, method: string, status: number, seconds: number): void {
      httpDuration.observe({ route, method, status: String(status) }, seconds);
    },
    socketOpened(kind: string, delta: number): void {
      sockets.inc({ kind }, delta);
    },
    webhookAttempt(outcome: 'delivered' | 'retry' | 'failed'): void {
      webhookAttempts.inc({ outcome });
    },
    /** A background worker's result was dropped: its lease had been taken over. */
    leaseLost(worker: 'webhook' | 'ingestion' | 'evaluation'): void {
      leasesLost.inc({ worker });
    },
    voice: {
      voiceToVoice(ms: number): void {
        voiceToVoice.observe(ms / 1000);
      },
      turn(mode: string): void {
        turns.inc({ mode });
      },
      interruption(mode: string): void {
        interruptions.inc({ mode });
      },
      resumed(mode: string): void {
        resumed.inc({ mode });
      },
      firstByte(kind: 'stt' | 'llm' | 'tts' | 'realtime', provider: string, ms: number): void {
        providerTtfb.observe({ kind, provider }, ms / 1000);
      },
      frameLateness(ms: number): void {
        frameLateness.observe(ms / 1000);
      },
      droppedCallerFrame(): void {
        droppedCallerFrames.inc();
      },
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** Money: every debit ever posted to balances, by kind (from the ledger, exact across processes). */
function businessMetrics(registry: Registry, pool: DatabasePool): void {
  new Gauge({
    name: 'ledger_debits_usd',
    help: 'All debits ever posted to balances, by kind (from the ledger, exact across processes)',
    labelNames: ['kind'],
    registers: [registry],
    async collect() {
      const rows = await debitsByKind(pool);
      this.reset();
      for (const row of rows) this.set({ kind: row.kind }, row.total);
    },
  });
}
