import type { DatabasePool } from 'slonik';
import { findAssistant } from '../assistants/repository.js';
import { PlatformError, ValidationError } from '../errors.js';
import { datetime } from '../time.js';
import { campaignOwned, findCall, listCalls, type CallFilters, type CallRow } from './repository.js';

/** A call as the API shows it (spec 2.10). */
export function callView(row: CallRow, recordingUrl: (callId: number) => string) {
  return {
    id: row.id,
    assistant_name: row.assistant_name,
    campaign_name: row.campaign_name,
    type: row.type,
    duration: row.duration,
    assistant_phone_number: row.assistant_phone_number,
    client_phone_number: row.client_phone_number,
    status: row.status,
    transcript: row.transcript,
    variables: row.variables,
    evaluation: row.evaluation,
    webhook_response: row.webhook_response,
    carrier_cost: row.carrier_cost,
    total_cost: row.total_cost,
    answered_by: row.answered_by,
    recording_url: row.recording_path ? recordingUrl(row.id) : null,
    created_at: datetime(row.created_at),
    updated_at: datetime(row.updated_at),
  };
}

export function createCallService({ pool, recordingUrl }: { pool: DatabasePool; recordingUrl: (callId: number) => string }) {
  return {
    async get(userId: number, id: number) {
      const row = await findCall(pool, userId, id);
      if (!row) throw new PlatformError('call_not_found');
      return callView(row, recordingUrl);
    },

    /** @throws ValidationError when the assistant or campaign filter names another user's (or no) resource. */
    async list(userId: number, filters: CallFilters, page: number, perPage: number) {
      if (filters.assistantId !== undefined && !(await findAssistant(pool, userId, filters.assistantId))) {
        throw ValidationError.field('assistant_id', 'The selected assistant id is invalid.');
      }
      if (filters.campaignId !== undefined && !(await campaignOwned(pool, userId, filters.campaignId))) {
        throw ValidationError.field('campaign_id', 'The selected campaign id is invalid.');
      }
      const { items, total } = await listCalls(pool, userId, filters, page, perPage);
      return { items: items.map((item) => callView(item, recordingUrl)), total, page, perPage };
    },
  };
}

export type CallService = ReturnType<typeof createCallService>;
