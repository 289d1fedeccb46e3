import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { refreshKnowledgebaseStatus } from './repository.js';
import { dropUpload } from './uploads.js';

/**
 * The document job queue in PostgreSQL. A job is claimed with FOR UPDATE SKIP LOCKED and leased
 * for a while; a process that dies mid-job leaves the lease to expire, and the job is claimed
 * again. The lease is renewed while work goes on. Each claim carries an id of its own, and every
 * outcome is recorded only under it: a run whose lease was taken over records nothing.
 */

export const claimedJob = z.object({
  id: z.number(),
  /** This claim's own id: the job is this run's while it carries it. */
  claim: z.string(),
  document_id: z.number(),
  attempts: z.number(),
  user_id: z.number(),
  knowledgebase_id: z.number(),
  type: z.enum(['website', 'pdf', 'txt', 'docx']),
  source: z.record(z.unknown()),
  language: z.string().nullable(),
});
export type ClaimedJob = z.infer<typeof claimedJob>;

/** Claims the next job that is due (or whose lease expired). */
export async function claimJob(db: CommonQueryMethods, leaseMs: number): Promise<ClaimedJob | null> {
  return db.maybeOne(sql.type(claimedJob)`
    WITH next AS (
      SELECT id FROM document_jobs
      WHERE (status = 'pending' AND run_after <= now()) OR (status = 'running' AND lease_expires_at < now())
      ORDER BY run_after, id
      LIMIT 1
      FOR UPDATE SKIP LOCKED
    ), claimed AS (
      UPDATE document_jobs j SET status = 'running', attempts = j.attempts + 1, claim = gen_random_uuid(),
        lease_expires_at = now() + ${leaseMs} * interval '1 millisecond', updated_at = now()
      FROM next WHERE j.id = next.id
      RETURNING j.id, j.claim, j.document_id, j.attempts
    )
    SELECT c.id, c.claim::text AS claim, c.document_id, c.attempts, d.user_id, d.knowledgebase_id, d.type, d.source,
      (SELECT l.iso_2 FROM assistants a JOIN languages l ON l.id = a.language_id
       WHERE a.knowledgebase_id = d.knowledgebase_id ORDER BY a.id LIMIT 1) AS language
    FROM claimed c JOIN documents d ON d.id = c.document_id`);
}

/**
 * The job as this claim holds it: running, under this claim. A worker whose lease ran out while it
 * still worked, or whose job was given back at a stop, finds the job claimed again (or settled)
 * and must not record an outcome over the newer claim's, nor renew its lease.
 */
const ownClaim = (job: ClaimedJob) => sql.fragment`id = ${job.id} AND status = 'running' AND claim = ${job.claim}::uuid`;

/**
 * Holds the job under this claim until the end of the transaction `db` is: its document's row,
 * then the job's, are locked, so no other claim can take the job over and no delete can remove the
 * document meanwhile. What is written after it in that transaction is written under the lease.
 * @returns `taken over` when the job carries another claim (or is settled), `deleted` when its
 * document is gone.
 */
export async function holdJob(db: CommonQueryMethods, job: ClaimedJob): Promise<'held' | 'taken over' | 'deleted'> {
  // The document before its job: the order in which a document's delete (its cascade) takes them,
  // so the two wait for each other instead of deadlocking.
  if (!(await db.exists(sql.unsafe`SELECT 1 FROM documents WHERE id = ${job.document_id} FOR NO KEY UPDATE`))) return 'deleted';
  return (await db.exists(sql.unsafe`SELECT 1 FROM document_jobs WHERE ${ownClaim(job)} FOR UPDATE`)) ? 'held' : 'taken over';
}

export async function renewLease(db: CommonQueryMethods, job: ClaimedJob, leaseMs: number): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE document_jobs SET lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
    WHERE ${ownClaim(job)}`);
}

/**
 * Final success: document active, job done, its uploaded file dropped, knowledgebase status recomputed. `deleted` when the
 * document is gone; `superseded` when the job was claimed again meanwhile (that claim settles it).
 */
export async function completeJob(db: CommonQueryMethods, job: ClaimedJob): Promise<'done' | 'deleted' | 'superseded'> {
  const own = await db.query(sql.unsafe`UPDATE document_jobs SET status = 'done', lease_expires_at = NULL, last_error = NULL, updated_at = now() WHERE ${ownClaim(job)}`);
  if (own.rowCount === 0) return (await documentExists(db, job.document_id)) ? 'superseded' : 'deleted';
  await dropUpload(db, job.document_id);
  const updated = await db.query(sql.unsafe`UPDATE documents SET status = 'active', error = NULL, updated_at = now() WHERE id = ${job.document_id}`);
  await refreshKnowledgebaseStatus(db, job.knowledgebase_id);
  return updated.rowCount > 0 ? 'done' : 'deleted';
}

async function documentExists(db: CommonQueryMethods, documentId: number): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM documents WHERE id = ${documentId}`);
}

/**
 * Final failure: document failed with a message for the user, its uploaded file dropped (nothing
 * runs the job again), unless the job was claimed again meanwhile; under `holdJob`'s locks. Run
 * inside a transaction.
 * @returns whether it was recorded (false: the job was not this claim's any more, or is gone).
 */
export async function failJob(db: CommonQueryMethods, job: ClaimedJob, message: string): Promise<boolean> {
  if ((await holdJob(db, job)) !== 'held') return false;
  await db.query(sql.unsafe`UPDATE document_jobs SET status = 'failed', lease_expires_at = NULL, last_error = ${message}, updated_at = now() WHERE ${ownClaim(job)}`);
  await dropUpload(db, job.document_id);
  await db.query(sql.unsafe`UPDATE documents SET status = 'failed', error = ${message}, updated_at = now() WHERE id = ${job.document_id}`);
  await refreshKnowledgebaseStatus(db, job.knowledgebase_id);
  return true;
}

/**
 * A transient failure: try again after `delayMs` (unless the job was claimed again meanwhile); the
 * uploaded file is kept for it.
 * @returns whether it was recorded.
 */
export async function retryJob(db: CommonQueryMethods, job: ClaimedJob, message: string, delayMs: number): Promise<boolean> {
  const own = await db.query(sql.unsafe`
    UPDATE document_jobs SET status = 'pending', lease_expires_at = NULL, last_error = ${message},
      run_after = now() + ${delayMs} * interval '1 millisecond', updated_at = now()
    WHERE ${ownClaim(job)}`);
  return own.rowCount > 0;
}

/**
 * Gives a claimed job back at a stop: due at once, and the run not counted against its attempts.
 * A run that still finishes afterwards (or fails, its worker threads closed) finds its claim gone
 * and records nothing.
 */
export async function releaseJob(db: CommonQueryMethods, job: ClaimedJob): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE document_jobs SET status = 'pending', attempts = attempts - 1, claim = NULL, lease_expires_at = NULL, run_after = now(), updated_at = now()
    WHERE ${ownClaim(job)}`);
}

/** Jobs pending or running, and the age in seconds of the oldest (null when there is none). */
export async function jobQueueDepth(db: CommonQueryMethods): Promise<{ depth: number; oldest: number | null }> {
  return db.one(sql.type(z.object({ depth: z.number(), oldest: z.number().nullable() }))`
    SELECT count(*)::int AS depth, extract(epoch FROM now() - min(created_at))::float8 AS oldest
    FROM document_jobs WHERE status IN ('pending', 'running')`);
}
