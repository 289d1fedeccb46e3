/**
 * The conversation machine with its I/O swapped by `provide()` (no database, no model):
 * 1. messages queue and run one at a time, in order; the states pass accepting -> generating -> saving.
 * 2. a model that keeps calling tools is stopped after 5 rounds and must answer in words.
 * 3. a failing model leads to refunding and a rejected job; the next message is still answered.
 * 4. with AI off nothing is generated (no generating state is entered).
 */
import t from 'tap';
import { createActor, fromPromise } from 'xstate';
import { MAX_TOOL_ROUNDS } from '../runtime/agent/round.js';
import { conversationMachine, type ConversationSetup, type Turn, type TurnResult } from '../runtime/conversations/machine.js';
import type { LlmProvider } from '../runtime/llm/types.js';

const setup = (): ConversationSetup => ({
  conversationId: 'c',
  ownerId: 1,
  price: 0.01,
  llm: { provider: {} as LlmProvider, model: 'm' },
  fallback: undefined,
  temperature: 0,
  systemPrompt: 'sys',
  functions: [],
  promptKnowledgebaseId: undefined,
  history: [],
});

function run(options: { aiEnabled?: boolean; think: (turn: Turn) => Promise<{ text: string; calls: Array<{ id: string; name: string; arguments: string }> }> }) {
  const states: string[] = [];
  const log: string[] = [];
  const machine = conversationMachine.provide({
    actors: {
      accept: fromPromise(async ({ input }) => {
        log.push(`accept ${input.job.text}`);
        return { messageId: log.length, charged: 0.01, aiEnabled: options.aiEnabled ?? true, systemPrompt: 'sys', deadline: Date.now() + 60_000 };
      }),
      think: fromPromise(async ({ input }) => options.think(input.turn)),
      act: fromPromise(async ({ input }) => ({ results: input.turn.pending.map((call) => ({ call, args: {}, result: { ok: true } })) })),
      save: fromPromise(async ({ input }) => void log.push(`save ${input.turn.text}`)),
      refund: fromPromise(async ({ input }) => void log.push(`refund ${input.turn.job.text}`)),
    },
  });
  const actor = createActor(machine, { input: { setup: setup() } });
  actor.subscribe((snapshot) => states.push(String(snapshot.value)));
  actor.start();
  const send = (text: string) => new Promise<TurnResult>((resolve, reject) => actor.send({ type: 'message', job: { text, resolve, reject } }));
  return { actor, states, log, send };
}

t.test('one message at a time, in order', async (t) => {
  const { states, log, send } = run({ think: async (turn) => ({ text: `re: ${turn.job.text}`, calls: [] }) });
  const results = await Promise.all([send('a'), send('b'), send('c')]);
  t.same(results.map((r) => r.message), ['re: a', 're: b', 're: c']);
  t.same(log, ['accept a', 'save re: a', 'accept b', 'save re: b', 'accept c', 'save re: c'], 'never interleaved');
  t.match(states.join(' '), /accepting generating saving idle/);
});

t.test('tool rounds are capped', async (t) => {
  const rounds: number[] = [];
  const { send } = run({
    think: async (turn) => {
      rounds.push(turn.rounds);
      return turn.rounds >= MAX_TOOL_ROUNDS ? { text: 'done', calls: [] } : { text: '', calls: [{ id: `c${turn.rounds}`, name: 'loop', arguments: '{}' }] };
    },
  });
  const result = await send('go');
  t.equal(result.message, 'done');
  t.equal(result.function_calls.length, MAX_TOOL_ROUNDS);
  t.same(rounds, [0, 1, 2, 3, 4, 5]);
});

t.test('failures refund and the conversation goes on', async (t) => {
  let fail = true;
  const { states, log, send } = run({ think: async (turn) => {
    if (fail) {
      fail = false;
      throw new Error('model down');
    }
    return { text: `re: ${turn.job.text}`, calls: [] };
  } });
  await t.rejects(send('first'), { message: 'model down' });
  t.ok(log.includes('refund first'));
  t.ok(states.includes('refunding'));
  t.equal((await send('second')).message, 're: second');
  t.notOk(log.includes('save '), 'nothing saved for the failed turn');
});

t.test('AI off generates nothing', async (t) => {
  let thought = false;
  const { states, send } = run({ aiEnabled: false, think: async () => {
    thought = true;
    return { text: 'x', calls: [] };
  } });
  t.same(await send('hello'), { message: null, function_calls: [] });
  t.notOk(thought);
  t.notOk(states.includes('generating'), 'no transition to generating');
});
