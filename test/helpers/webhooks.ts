import { createDatabasePool } from '../../runtime/store/pool.js';
import { enqueueCallEnded } from '../../runtime/webhooks/callEnded.js';
import { withClient } from './database.js';

/**
 * Ends a call as the voice engine does for the webhook tests: the call row is written with SQL
 * and its `call.ended` delivery queued with `enqueueCallEnded` in the same transaction.
 */
export async function endCall(databaseUrl: string, userId: number, assistantId: number, status = 'completed', answered = true): Promise<{ callId: number; queued: boolean }> {
  const pool = await createDatabasePool(databaseUrl, { maximumPoolSize: 1 });
  try {
    return await pool.transaction(async (tx) => {
      const callId = await withClient(databaseUrl, async (db) =>
        Number((await db.query(
          `INSERT INTO calls (user_id, assistant_id, assistant_name, type, mode, status, duration, client_phone_number, assistant_phone_number, transcript, variables, evaluation, answered_at, ended_at, created_at)
           VALUES ($1, $2, 'Caller', 'outbound', 'pipeline', $3, 42, '+4915112345678', '+14155550100', 'assistant: Hi\nuser: Bye', '{"name":"Ada"}', '{"interested":true}', $4, '2026-03-01T10:01:00Z', '2026-03-01T10:00:00Z') RETURNING id`,
          [userId, assistantId, status, answered ? '2026-03-01T10:00:10Z' : null],
        )).rows[0].id),
      );
      return { callId, queued: await enqueueCallEnded(tx, callId) };
    });
  } finally {
    await pool.end();
  }
}
