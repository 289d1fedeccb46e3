import type { DatabasePool } from 'slonik';
import type { Block } from '../../workers/text.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../logger.js';
import { OutboundError } from '../net/outbound.js';
import type { IndexedChunk, SearchIndex } from '../search/types.js';
import type { WorkerPool } from '../workers.js';
import { CrawlError, type Crawler } from './crawler.js';
import { EmbeddingError, type Embedder } from './embedder.js';
import { claimJob, completeJob, failJob, holdJob, releaseJob, renewLease, retryJob, type ClaimedJob } from './jobs.js';
import { readLegacyUpload, uploadedBytes } from './uploads.js';

/**
 * The ingestion worker: claims document jobs, extracts text (worker pool), chunks and embeds it,
 * writes it to the search index, and settles the document as `active` or `failed`. Failures a
 * retry cannot fix (corrupt files, robots.txt, 404s) fail at once with a message for the user;
 * others (network, embedding service, a crashed worker) are retried with backoff. A run holds its
 * job under a claim whose lease it renews while it works; its outcome (the chunks with the
 * document's status, a failure, a retry) is recorded only while the job is still its own, so a
 * run whose lease was taken over by another process writes nothing and the chunks are that
 * process's alone.
 */

export interface IngestionOptions {
  readonly pool: DatabasePool;
  readonly workers: WorkerPool;
  readonly embedder: Embedder;
  readonly index: SearchIndex;
  readonly crawler: Crawler;
  /** Where files uploaded by earlier versions are: read when the database holds no bytes for the document. */
  readonly dataDir: string;
  readonly logger: Logger;
  /** The clock of the poll and the lease renewals (a job's lease itself is kept in database time). */
  readonly clock: Clock;
  /** Jobs processed at once. */
  readonly concurrency: number;
  /** Lease of a claimed job; renewed every third of it while the job runs. */
  readonly leaseMs: number;
  /** How often idle runners look for due jobs. @defaultValue 1 000 ms */
  readonly pollMs?: number;
  /** Attempts before a transiently failing job is given up. @defaultValue 3 */
  readonly maxAttempts?: number;
  /** First retry delay; each further one is 4 times longer. @defaultValue 5 000 ms */
  readonly backoffMs?: number;
  /** Called when a run's outcome was dropped: its lease had been taken over (metrics). */
  readonly onLeaseLost?: () => void;
}

class PermanentFailure extends Error {
  override readonly name = 'PermanentFailure';
}

export function createIngestion(options: IngestionOptions) {
  const { pool, workers, embedder, index, crawler, logger, clock } = options;
  const pollMs = options.pollMs ?? 1000;
  const maxAttempts = options.maxAttempts ?? 3;
  const backoffMs = options.backoffMs ?? 5000;
  let running = false;
  let stopPoll: (() => void) | undefined;
  /** Jobs being run, with the claim each holds. */
  const active = new Map<Promise<void>, ClaimedJob>();
  const claims = new Set<Promise<unknown>>();
  /** Drains under way (each between its first claim and its return). */
  let draining = 0;
  const idleWaiters: Array<() => void> = [];

  function settleIdle(): void {
    if (draining === 0 && active.size === 0) for (const waiter of idleWaiters.splice(0)) waiter();
  }

  async function blocksOf(job: ClaimedJob): Promise<Block[]> {
    if (job.type === 'website') {
      const links = Array.isArray(job.source.links) ? (job.source.links as string[]) : undefined;
      const result = await crawler.crawl({
        url: typeof job.source.url === 'string' ? job.source.url : undefined,
        links,
        relativeLinksLimit: typeof job.source.relative_links_limit === 'number' ? job.source.relative_links_limit : 10,
        subject: { userId: job.user_id, knowledgebaseId: job.knowledgebase_id, documentId: job.document_id },
      });
      return result.blocks;
    }
    const path = job.source.path;
    const bytes = (await uploadedBytes(pool, job.document_id)) ?? (typeof path === 'string' ? await readLegacyUpload(options.dataDir, path) : null);
    if (!bytes) throw new PermanentFailure('The uploaded file is missing.');
    const extracted = await workers.extractFile({ type: job.type, bytes });
    if ('error' in extracted) throw new PermanentFailure(extracted.error);
    return extracted.blocks;
  }

  async function process(job: ClaimedJob): Promise<void> {
    const blocks = await blocksOf(job);
    const { chunks, vectors } = await workers.chunkAndEmbed({ blocks, embed: embedder.local });
    if (chunks.length === 0) throw new PermanentFailure('No text could be extracted from this document.');
    let embeddings: Float32Array[];
    if (vectors) {
      const dimensions = vectors.length / chunks.length;
      embeddings = chunks.map((_, i) => vectors.slice(i * dimensions, (i + 1) * dimensions));
    } else {
      embeddings = await embedder.embed(chunks.map((chunk) => chunk.content));
    }
    const indexed: IndexedChunk[] = chunks.map((chunk, i) => ({ index: i, content: chunk.content, source: chunk.source, embedding: embeddings[i]! }));
    const document = { userId: job.user_id, knowledgebaseId: job.knowledgebase_id, documentId: job.document_id, language: job.language ?? undefined, embeddingModel: embedder.model };
    // The chunks and the document's status commit together, under the job's row lock: no other
    // claim can take the job over (nor a delete remove the document) while they are written.
    const outcome = await pool.transaction(async (tx) => {
      const hold = await holdJob(tx, job);
      if (hold !== 'held') return hold;
      await index.replaceDocument(document, indexed, tx);
      return completeJob(tx, job);
    });
    if (outcome === 'deleted') {
      logger.info({ documentId: job.document_id }, 'document deleted during ingestion; nothing indexed');
      return;
    }
    if (outcome === 'taken over' || outcome === 'superseded') {
      leaseLost(job, 'indexed');
      return;
    }
    logger.info({ documentId: job.document_id, chunks: chunks.length, attempt: job.attempts }, 'document ingested');
  }

  /**
   * A run found its job claimed again (its lease ran out while it worked): the newer run settles it.
   * `result` is what was dropped: the document's chunks, its failure, or a retry.
   */
  function leaseLost(job: ClaimedJob, result: 'indexed' | 'failed' | 'retry'): void {
    options.onLeaseLost?.();
    logger.warn({ documentId: job.document_id, jobId: job.id, attempt: job.attempts, result }, 'the lease on a document job was taken over; its result is dropped');
  }

  function isPermanent(error: unknown): boolean {
    if (error instanceof PermanentFailure || error instanceof CrawlError) return true;
    if (error instanceof OutboundError || error instanceof EmbeddingError) return !error.retryable;
    return false;
  }

  function userMessage(error: unknown): string {
    if (error instanceof PermanentFailure || error instanceof CrawlError || error instanceof OutboundError || error instanceof EmbeddingError) return error.message;
    return 'The document could not be processed.';
  }

  async function runJob(job: ClaimedJob): Promise<void> {
    // Two claims more than the attempts: a run cut short by its neighbour's crash, or by a lease lost in a database blip, is not held against it.
    if (job.attempts > maxAttempts + 2) {
      // Claimed this often with no outcome recorded: each run ended with its process (a document
      // that brings the process down, or takes longer than its lease every time). Not run again.
      try {
        if (!(await pool.transaction((tx) => failJob(tx, job, 'The document could not be processed.')))) return leaseLost(job, 'failed');
        await index.deleteDocument(job.user_id, job.document_id);
        logger.error({ documentId: job.document_id, attempt: job.attempts }, 'document failed: its runs never finished');
      } catch (error) {
        logger.warn({ err: error, documentId: job.document_id }, 'could not record the ingestion outcome');
      }
      return;
    }
    const stopRenewing = clock.every(Math.max(50, Math.floor(options.leaseMs / 3)), () =>
      renewLease(pool, job, options.leaseMs).catch((error: unknown) => logger.warn({ err: error, jobId: job.id }, 'could not renew job lease')),
    );
    try {
      await process(job);
    } catch (error) {
      const message = userMessage(error);
      try {
        if (isPermanent(error) || job.attempts >= maxAttempts) {
          if (!(await pool.transaction((tx) => failJob(tx, job, message)))) return leaseLost(job, 'failed');
          // Chunks an earlier run wrote to an index outside PostgreSQL before its outcome could be
          // recorded (search does not look at the document's status).
          await index.deleteDocument(job.user_id, job.document_id);
          logger.info({ documentId: job.document_id, attempt: job.attempts, reason: message }, 'document failed');
        } else {
          if (!(await retryJob(pool, job, message, backoffMs * 4 ** (job.attempts - 1)))) return leaseLost(job, 'retry');
          logger.warn({ err: error, documentId: job.document_id, attempt: job.attempts }, 'document ingestion will be retried');
        }
      } catch (settleError) {
        // The document may have been deleted meanwhile; the lease expiry covers anything else.
        logger.warn({ err: settleError, documentId: job.document_id }, 'could not record the ingestion outcome');
      }
    } finally {
      stopRenewing();
    }
  }

  /**
   * Claims and runs jobs until none is due or every slot is busy. Drains run side by side (a wake,
   * a finished job, the poll): a claim in progress holds its slot, so together they never run more
   * than `concurrency` jobs.
   */
  async function drain(): Promise<void> {
    draining++;
    try {
      await claimAndRun();
    } finally {
      draining--;
      settleIdle();
    }
  }

  async function claimAndRun(): Promise<void> {
    while (running && active.size + claims.size < options.concurrency) {
      const claim = claimJob(pool, options.leaseMs);
      claims.add(claim);
      let job: ClaimedJob | null;
      try {
        job = await claim;
      } catch (error) {
        if (running) logger.warn({ err: error }, 'could not claim a document job');
        return;
      } finally {
        claims.delete(claim);
      }
      if (!job) return;
      const work = runJob(job).finally(() => {
        active.delete(work);
        if (running) void drain();
        settleIdle();
      });
      active.set(work, job);
    }
  }

  return {
    start(): void {
      if (running) return;
      running = true;
      void drain();
      stopPoll = clock.every(pollMs, drain);
    },
    /** A job was just enqueued: look now instead of at the next poll. */
    wake(): void {
      if (running) void drain();
    },
    /** Resolves once no job is being claimed or run: every job due when the last claim looked has its outcome recorded. */
    idle(): Promise<void> {
      return draining === 0 && active.size === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve));
    },
    /** The first step of a stop: no new job is claimed; the jobs in hand go on until `stop`. */
    drain(): void {
      running = false;
      stopPoll?.();
    },
    /**
     * Stops claiming and waits up to `graceMs` for the jobs in hand (a claim under way included);
     * those still running then are given back, due at once, for the next start or another process
     * to run again (what they did so far is redone).
     */
    async stop(graceMs = Infinity): Promise<void> {
      running = false;
      stopPoll?.();
      await Promise.allSettled([...claims]);
      let timeout: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => {
        if (graceMs !== Infinity) timeout = setTimeout(resolve, graceMs);
      });
      await Promise.race([Promise.allSettled([...active.keys()]), late]);
      clearTimeout(timeout);
      await Promise.allSettled(
        [...active.values()].map((job) =>
          releaseJob(pool, job).then(
            () => logger.info({ documentId: job.document_id }, 'document job given back at the stop'),
            (error: unknown) => logger.warn({ err: error, documentId: job.document_id }, 'could not give a document job back; its lease will lapse'),
          ),
        ),
      );
    },
  };
}

export type Ingestion = ReturnType<typeof createIngestion>;
