import type { CommonQueryMethods } from 'slonik';
import { callForWebhook } from '../calls/repository.js';
import { datetime } from '../time.js';
import { insertCallEndedDelivery } from './repository.js';

/**
 * Post-call webhooks go through a transactional outbox: `enqueueCallEnded` writes the delivery in
 * the transaction that ends the call, so no ended call lacks its notification; the worker
 * (worker.ts) sends it.
 */

const ENDED_ANSWERED = new Set(['completed', 'ended', 'ended_by_customer', 'ended_by_assistant']);

/**
 * Queues the `call.ended` notification when the call's assistant wants one. Run it in the
 * transaction that ends the call.
 * @param holdMs delay before the first attempt (the post-call evaluation releases it sooner).
 * @returns whether a delivery was queued.
 */
export async function enqueueCallEnded(db: CommonQueryMethods, callId: number, recordingUrl: string | null = null, holdMs = 0): Promise<boolean> {
  const call = await callForWebhook(db, callId);
  if (!call || !call.is_webhook_active || !call.webhook_url) return false;
  if (call.send_webhook_only_on_completed && !(ENDED_ANSWERED.has(call.status) && call.answered_at !== null)) return false;
  const payload = {
    event: 'call.ended',
    id: call.id,
    // The campaign and lead that dialled the call; null for any other call.
    campaign_id: call.campaign_id,
    campaign_lead_id: call.campaign_lead_id,
    customer_phone: call.client_phone_number,
    assistant_phone: call.assistant_phone_number,
    duration: call.duration,
    status: call.status,
    answered_by: call.answered_by,
    extracted_variables: call.evaluation ?? {},
    input_variables: { ...(call.input_variables ?? {}), ...call.variables },
    transcript: call.transcript,
    ...(call.include_recording_in_webhook ? { recording_url: recordingUrl } : {}),
    created_at: datetime(call.created_at),
    finished_at: call.ended_at ? datetime(call.ended_at) : null,
  };
  await insertCallEndedDelivery(db, { userId: call.user_id, assistantId: call.assistant_id, callId: call.id, url: call.webhook_url, body: JSON.stringify(payload), holdMs });
  return true;
}
