import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { DatabasePool } from 'slonik';
import { findAssistant } from '../assistants/repository.js';
import type { Clock } from '../clock.js';
import { PlatformError, ValidationError } from '../errors.js';
import { datetime, pgTimestampToIso } from '../time.js';
import type { SearchIndex } from '../search/types.js';
import { verifyRecording } from './recording.js';
import { campaignOwned, findCall, findCallsByIds, listCallEvents, listCalls, liveCallFacts, recordingPathOf, type CallFilters, type CallRow } from './repository.js';

/** `search_after` cursors: the last call's time and id, base64url. */
export function encodeCursor(last: { createdAt: string; id: number }): string {
  return Buffer.from(`${last.createdAt}|${last.id}`).toString('base64url');
}

/** A timestamp as cursors carry it (ISO 8601 with its zone), which PostgreSQL and Elasticsearch both read. */
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

function decodeCursor(cursor: string): { createdAt: string; id: number } {
  const [createdAt = '', id = '', ...rest] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  if (rest.length > 0 || !CURSOR_TIME.test(createdAt) || Number.isNaN(Date.parse(createdAt)) || createdAt.startsWith('0000') || !/^\d{1,15}$/.test(id)) {
    throw ValidationError.field('search_after', 'The search after cursor is invalid.');
  }
  return { createdAt, id: Number(id) };
}

/** Transcript search pages by number only this deep (Elasticsearch's result window); `search_after` goes further. */
export const SEARCH_WINDOW = 10_000;

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

export interface CallServiceDeps {
  readonly pool: DatabasePool;
  /** A call's signed recording URL, valid from now. */
  readonly recordingUrl: (callId: number) => string;
  readonly index: SearchIndex;
  /** Where recordings are and the key that signs their URLs. */
  readonly recordings: { readonly dir: string; readonly secret: Buffer };
  /** The clock recording links expire by (the one that signs them), and the calls' clock. */
  readonly clock: Clock;
  /** A call this process holds live: its transcript so far and its answer time (by the clock); undefined otherwise. */
  readonly live?: (callId: number) => { transcript: string; answeredAt: number | null } | undefined;
}

/** Statuses of a call that has not ended. */
const LIVE_STATUSES: ReadonlySet<string> = new Set(['initiated', 'ringing', 'in-progress']);

export function createCallService({ pool, recordingUrl, index, recordings, clock, live }: CallServiceDeps) {
  /**
   * A live call as it stands: its duration from the answer to now (by the clock), and its
   * transcript so far, from its session when this process holds it, else as its process last
   * wrote it with a heartbeat.
   */
  async function asItStands(row: CallRow): Promise<CallRow> {
    if (!LIVE_STATUSES.has(row.status)) return row;
    const here = live?.(row.id);
    const facts = here ? { answered_ms: here.answeredAt, beat_transcript: here.transcript } : await liveCallFacts(pool, row.id);
    // Ended meanwhile: the row as read is the end's.
    if (!facts) return (await findCall(pool, row.user_id, row.id)) ?? row;
    const duration = facts.answered_ms === null ? 0 : Math.max(0, Math.floor((clock.now() - facts.answered_ms) / 1000));
    return { ...row, duration, transcript: facts.beat_transcript ?? row.transcript };
  }

  return {
    /** One call; a live one as it stands (duration and transcript so far). */
    async get(userId: number, id: number) {
      const row = await findCall(pool, userId, id);
      if (!row) throw new PlatformError('call_not_found');
      return callView(await asItStands(row), recordingUrl);
    },

    /** A page of the call's events in the order they happened (see `events.ts`). @throws PlatformError `call_not_found`. */
    async events(userId: number, id: number, page: number, perPage: number) {
      if (!(await findCall(pool, userId, id))) throw new PlatformError('call_not_found');
      const { items, total } = await listCallEvents(pool, id, page, perPage);
      return { items: items.map((event) => ({ type: event.type, at: pgTimestampToIso(event.at), offset_ms: event.offset_ms, data: event.data })), total, page, perPage };
    },

    /** @throws ValidationError when the assistant or campaign filter names another user's (or no) resource. */
    async list(userId: number, filters: CallFilters, page: number, perPage: number, search?: { text: string; after?: string }) {
      if (filters.assistantId !== undefined && !(await findAssistant(pool, userId, filters.assistantId))) {
        throw ValidationError.field('assistant_id', 'The selected assistant id is invalid.');
      }
      if (filters.campaignId !== undefined && !(await campaignOwned(pool, userId, filters.campaignId))) {
        throw ValidationError.field('campaign_id', 'The selected campaign id is invalid.');
      }
      if (search) {
        if (!search.after && page * perPage > SEARCH_WINDOW) {
          throw ValidationError.field('page', `A transcript search pages by number through its first ${SEARCH_WINDOW} calls; continue with search_after.`);
        }
        const found = await index.searchCalls({ userId, text: search.text, filters, size: perPage, from: (page - 1) * perPage, after: search.after ? decodeCursor(search.after) : undefined });
        const rows = await findCallsByIds(pool, userId, found.ids);
        const next = found.last && found.ids.length === perPage ? encodeCursor(found.last) : null;
        return { items: rows.map((item) => callView(item, recordingUrl)), total: found.total, page, perPage, nextSearchAfter: next };
      }
      const { items, total } = await listCalls(pool, userId, filters, page, perPage);
      return { items: items.map((item) => callView(item, recordingUrl)), total, page, perPage, nextSearchAfter: undefined };
    },

    /**
     * The file of a call's recording, reached by its signed URL (no user is signed in: the
     * signature is the permission).
     * @throws PlatformError `forbidden` for a wrong or expired signature (or no call id);
     *   `not_found` when the call has no recording or its file is gone.
     */
    async recording(callId: number, expires: number, signature: string): Promise<{ path: string; size: number }> {
      if (!Number.isInteger(callId) || !verifyRecording(recordings.secret, callId, expires, signature, clock.now())) {
        throw new PlatformError('forbidden', { message: 'The recording link is invalid or has expired.' });
      }
      const relative = await recordingPathOf(pool, callId);
      if (!relative) throw new PlatformError('not_found', { message: 'Recording not found.' });
      const path = join(recordings.dir, relative);
      const size = await stat(path).then((s) => s.size, () => -1);
      if (size < 0) throw new PlatformError('not_found', { message: 'Recording not found.' });
      return { path, size };
    },
  };
}

export type CallService = ReturnType<typeof createCallService>;
