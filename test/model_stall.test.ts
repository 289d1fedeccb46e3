/**
 * A model that stops sending is given up: after `stallMs` without an event (before the first one
 * or mid-answer) the round fails as the model's failure, and the fallback model answers when
 * there is one; a round cancelled by the caller stays cancelled.
 */
import t from 'tap';
import { streamRound } from '../runtime/agent/round.js';
import { createLogger } from '../runtime/logger.js';
import type { LlmEvent, LlmProvider, LlmRequest } from '../runtime/llm/types.js';

/** Sends `deltas`, then waits for its request to be aborted (as a stalled connection would). */
function stalling(name: string, deltas: string[]): LlmProvider {
  return {
    name,
    async *stream(request: LlmRequest): AsyncIterable<LlmEvent> {
      for (const delta of deltas) yield { type: 'text', delta };
      await new Promise((_, reject) => request.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
    },
  };
}
const answering: LlmProvider = {
  name: 'backup',
  async *stream(): AsyncIterable<LlmEvent> {
    yield { type: 'text', delta: 'From the fallback.' };
  },
};
const logger = createLogger('silent');
const round = (llm: LlmProvider, extra: Partial<Parameters<typeof streamRound>[0]> = {}) =>
  streamRound({ llm: { provider: llm, model: 'm' }, fallback: undefined, messages: [{ role: 'user', content: 'hi' }], functions: [], temperature: 0, stallMs: 50, onDelta: () => {}, ...extra }, logger, {});

t.test('silent from the start, or mid-answer', async (t) => {
  await t.rejects(round(stalling('mute', [])), { name: 'LlmError', message: 'The model sent nothing for 0 s', retryable: true });
  const heard: string[] = [];
  await t.rejects(round(stalling('halfway', ['Let me ', 'check '] ), { onDelta: (delta) => heard.push(delta) }), { name: 'LlmError' });
  t.same(heard, ['Let me ', 'check '], 'what came before the stall was passed on');
});

t.test('the fallback answers a stalled model', async (t) => {
  const result = await round(stalling('mute', []), { fallback: { provider: answering, model: 'b' } });
  t.same(result, { text: 'From the fallback.', calls: [] });
});

t.test('a cancelled round is not a stall', async (t) => {
  const cancel = new AbortController();
  const pending = round(stalling('mute', []), { signal: cancel.signal, stallMs: 60_000 });
  cancel.abort();
  await t.rejects(pending, { message: 'aborted' });
});
