import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { refreshKnowledgebaseStatus } from './repository.js';

/**
 * The document job queue in PostgreSQL. A job is claimed with FOR UPDATE SKIP LOCKED and leased
 * for a while; a process that dies mid-job leaves the lease to expire, and the job is claimed
 * again. The lease is renewed while work goes on.
 */

export const claimedJob = z.object({
  id: z.number(),
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
      UPDATE document_jobs j SET status = 'running', attempts = j.attempts + 1,
        lease_expires_at = now() + ${leaseMs} * interval '1 millisecond', updated_at = now()
      FROM next WHERE j.id = next.id
      RETURNING j.id, j.document_id, j.attempts
    )
    SELECT c.id, c.document_id, c.attempts, d.user_id, d.knowledgebase_id, d.type, d.source,
      (SELECT l.iso_2 FROM assistants a JOIN languages l ON l.id = a.language_id
       WHERE a.knowledgebase_id = d.knowledgebase_id ORDER BY a.id LIMIT 1) AS language
    FROM claimed c JOIN documents d ON d.id = c.document_id`);
}

export async function renewLease(db: CommonQueryMethods, jobId: number, leaseMs: number): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE document_jobs SET lease_expires_at = now() + ${leaseMs} * interval '1 millisecond'
    WHERE id = ${jobId} AND status = 'running'`);
}

/** Final success: document active, job done, knowledgebase status recomputed; false when the document is gone. */
export async function completeJob(db: CommonQueryMethods, job: ClaimedJob): Promise<boolean> {
  await db.query(sql.unsafe`UPDATE document_jobs SET status = 'done', lease_expires_at = NULL, last_error = NULL, updated_at = now() WHERE id = ${job.id}`);
  const updated = await db.query(sql.unsafe`UPDATE documents SET status = 'active', error = NULL, updated_at = now() WHERE id = ${job.document_id}`);
  await refreshKnowledgebaseStatus(db, job.knowledgebase_id);
  return updated.rowCount > 0;
}

/** Final failure: document failed with a message for the user. */
export async function failJob(db: CommonQueryMethods, job: ClaimedJob, message: string): Promise<void> {
  await db.query(sql.unsafe`UPDATE document_jobs SET status = 'failed', lease_expires_at = NULL, last_error = ${message}, updated_at = now() WHERE id = ${job.id}`);
  await db.query(sql.unsafe`UPDATE documents SET status = 'failed', error = ${message}, updated_at = now() WHERE id = ${job.document_id}`);
  await refreshKnowledgebaseStatus(db, job.knowledgebase_id);
}

/** A transient failure: try again after `delayMs`. */
export async function retryJob(db: CommonQueryMethods, job: ClaimedJob, message: string, delayMs: number): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE document_jobs SET status = 'pending', lease_expires_at = NULL, last_error = ${message},
      run_after = now() + ${delayMs} * interval '1 millisecond', updated_at = now()
    WHERE id = ${job.id}`);
}
