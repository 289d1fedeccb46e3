import t from 'tap';
import { createActor, fromCallback, type SnapshotFrom } from 'xstate';
import { ManualClock } from '../runtime/clock.js';
import { CONNECT_TIMEOUT_MS, callMachine, type CallEvent, type CallTimers, type ResponseRequest } from '../runtime/voice/machine.js';

/**
 * The call machine alone, its `respond` actor provided by the test (as the session provides its
 * responder) and its timers on a manual clock. Each scenario asserts the transitions that happen
 * and those that must not:
 * 1. Greeting first: answered → responding (greeting) → speaking on audio → listening when done;
 *    nothing the caller does before the answer moves the call.
 * 2. A barge-in stops the response (its actor is stopped) and listens; an interrupt, audio or a
 *    response's end while listening changes nothing.
 * 3. A goodbye cannot be cut: turns, interrupts and ends are ignored while it is said.
 * 4. `wait_for_customer`: the greeting is owed until the caller's first turn, then said with it.
 * 5. Silence: re-engagement after `max_silence`, the caller's speech brings the call back.
 * 6. Limits: the max-duration goodbye 5 s before the limit; hang-up at the limit.
 * 7. Before the answer: ringing times out to no-answer, an unconnected call fails after 5 minutes,
 *    carrier failures map to their statuses; a final state takes no further event.
 * 8. Voicemail: the message waits for the beep, then the call ends by the assistant; a failed
 *    response fails the call with its reason.
 */

const TIMERS: CallTimers = { ringingMs: 30_000, maxDurationMs: 600_000, maxSilenceMs: 10_000, initialSilenceMs: null, reengageMs: 5_000 };

function call(options: { greeting?: string | null; waitForCustomer?: boolean; timers?: Partial<CallTimers> } = {}) {
  const clock = new ManualClock(0);
  const requests: ResponseRequest[] = [];
  let stopped = 0;
  let sendBack: ((event: CallEvent) => void) | undefined;
  const machine = callMachine.provide({
    actors: {
      respond: fromCallback<{ type: string }, ResponseRequest>(({ input, sendBack: back }) => {
        requests.push(input);
        sendBack = back as (event: CallEvent) => void;
        return () => {
          stopped++;
        };
      }),
    },
  });
  const actor = createActor(machine, {
    clock: clock as never,
    input: { timers: { ...TIMERS, ...options.timers }, greeting: options.greeting === undefined ? 'Hello!' : options.greeting, waitForCustomer: options.waitForCustomer ?? false },
  });
  actor.start();
  const state = () => stateOf(actor.getSnapshot());
  return {
    clock,
    requests,
    state,
    stopped: () => stopped,
    send: (event: CallEvent) => actor.send(event),
    /** The response actor reports back. */
    respond: (event: CallEvent) => sendBack!(event),
    snapshot: () => actor.getSnapshot(),
  };
}

function stateOf(snapshot: SnapshotFrom<typeof callMachine>): string {
  const walk = (value: unknown): string => (typeof value === 'string' ? value : Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}.${walk(v)}`)[0]!);
  return walk(snapshot.value);
}

t.test('greeting first; nothing the caller does before the answer moves the call', async (t) => {
  const c = call();
  t.equal(c.state(), 'initiated');
  for (const event of [{ type: 'TURN', text: 'hi' }, { type: 'SPEECH_START' }, { type: 'INTERRUPT' }, { type: 'RESPONSE_AUDIO' }] as CallEvent[]) c.send(event);
  t.equal(c.state(), 'initiated', 'no turn, speech, interrupt or audio before the answer');
  t.same(c.requests, [], 'and no response asked for');
  c.send({ type: 'RINGING' });
  t.equal(c.state(), 'ringing');
  c.send({ type: 'ANSWERED' });
  t.equal(c.state(), 'in-progress.responding.thinking');
  t.same(c.requests, [{ kind: 'greeting', text: 'Hello!' }]);
  c.send({ type: 'RINGING' });
  t.equal(c.state(), 'in-progress.responding.thinking', 'a late ringing does not undo the answer');
  c.respond({ type: 'RESPONSE_AUDIO' });
  t.equal(c.state(), 'in-progress.responding.speaking');
  c.respond({ type: 'RESPONSE_DONE', outcome: {} });
  t.equal(c.state(), 'in-progress.listening.quiet');
  t.equal(c.stopped(), 1, 'the finished response actor is stopped');
});

t.test('a barge-in stops the response and listens; stray events while listening change nothing', async (t) => {
  const c = call({ greeting: null });
  c.send({ type: 'ANSWERED' });
  t.equal(c.state(), 'in-progress.listening.quiet', 'no greeting: listening at once');
  c.send({ type: 'TURN', text: 'Opening hours?' });
  t.same(c.requests.at(-1), { kind: 'turn', text: 'Opening hours?' });
  c.respond({ type: 'RESPONSE_AUDIO' });
  c.send({ type: 'INTERRUPT' });
  t.equal(c.state(), 'in-progress.listening.quiet');
  t.equal(c.stopped(), 1, 'the response actor was stopped');
  for (const event of [{ type: 'INTERRUPT' }, { type: 'RESPONSE_AUDIO' }, { type: 'RESPONSE_DONE', outcome: { end: 'ended_by_assistant' } }] as CallEvent[]) c.send(event);
  t.equal(c.state(), 'in-progress.listening.quiet', 'an interrupt, audio or a stray end while listening');
  t.equal(c.requests.length, 1, 'asks for nothing');
  c.send({ type: 'TURN', text: 'And Sundays?' });
  c.send({ type: 'TURN', text: 'And Sundays? Also holidays' });
  t.equal(c.stopped(), 2, 'a newer turn while thinking replaces the response');
  t.same(c.requests.at(-1), { kind: 'turn', text: 'And Sundays? Also holidays' });
  c.respond({ type: 'RESPONSE_DONE', outcome: { end: 'ended_by_assistant' } });
  t.equal(c.state(), 'ended_by_assistant', 'the model ending the call');
});

t.test('a goodbye cannot be cut', async (t) => {
  const c = call({ greeting: null });
  c.send({ type: 'ANSWERED' });
  c.send({ type: 'END', status: 'ended', goodbye: { kind: 'goodbye', reason: 'shutdown' } });
  t.equal(c.state(), 'in-progress.closing');
  for (const event of [{ type: 'TURN', text: 'wait' }, { type: 'INTERRUPT' }, { type: 'END', status: 'completed' }] as CallEvent[]) c.send(event);
  t.equal(c.state(), 'in-progress.closing', 'no turn, interrupt or second end during the goodbye');
  t.equal(c.stopped(), 0, 'the goodbye keeps playing');
  t.same(c.requests, [{ kind: 'goodbye', reason: 'shutdown' }]);
  c.clock.advance(20_000);
  t.equal(c.state(), 'ended', 'a goodbye that never ends is hung up after 20 s');

  const hungUp = call({ greeting: null });
  hungUp.send({ type: 'ANSWERED' });
  hungUp.send({ type: 'END', status: 'ended', goodbye: { kind: 'goodbye', reason: 'shutdown' } });
  hungUp.send({ type: 'CALLER_HUNG_UP' });
  t.equal(hungUp.state(), 'ended_by_customer', 'but the caller may hang up on it');
});

t.test('wait_for_customer: the greeting is owed until the first turn', async (t) => {
  const c = call({ waitForCustomer: true });
  c.send({ type: 'ANSWERED' });
  t.equal(c.state(), 'in-progress.listening.quiet');
  t.same(c.requests, [], 'no greeting before the caller speaks');
  c.send({ type: 'SPEECH_START' });
  t.equal(c.state(), 'in-progress.listening.hearing');
  c.send({ type: 'TURN', text: 'Hello?' });
  t.same(c.requests, [{ kind: 'greeting', text: 'Hello!', after: 'Hello?' }]);
  c.respond({ type: 'RESPONSE_DONE', outcome: {} });
  c.send({ type: 'TURN', text: 'Are you open?' });
  t.same(c.requests.at(-1), { kind: 'turn', text: 'Are you open?' }, 'greeted once');
});

t.test('silence: re-engagement, then the caller comes back', async (t) => {
  const c = call({ greeting: null });
  c.send({ type: 'ANSWERED' });
  c.clock.advance(9_999);
  t.equal(c.state(), 'in-progress.listening.quiet', 'not before max_silence');
  c.clock.advance(1);
  t.equal(c.state(), 'in-progress.away.reengaging');
  t.same(c.requests, [{ kind: 'reengage' }]);
  c.respond({ type: 'RESPONSE_DONE', outcome: {} });
  t.equal(c.state(), 'in-progress.away.waiting');
  c.clock.advance(5_000);
  t.equal(c.requests.length, 2, 'again after reengage_ms');
  c.respond({ type: 'RESPONSE_DONE', outcome: {} });
  c.send({ type: 'SPEECH_START' });
  t.equal(c.state(), 'in-progress.listening.hearing', 'the caller speaks: listening');
  c.clock.advance(60_000);
  t.equal(c.state(), 'in-progress.listening.hearing', 'no re-engagement while the caller speaks');
});

t.test('limits: the max-duration goodbye 5 s early, the hang-up at the limit', async (t) => {
  const c = call({ greeting: null, timers: { maxDurationMs: 60_000, maxSilenceMs: 120_000 } });
  c.send({ type: 'ANSWERED' });
  c.clock.advance(54_999);
  t.equal(c.state(), 'in-progress.listening.quiet');
  c.clock.advance(1);
  t.equal(c.state(), 'in-progress.closing');
  t.same(c.requests, [{ kind: 'goodbye', reason: 'max_duration' }]);
  c.clock.advance(5_000);
  t.equal(c.state(), 'ended_by_assistant', 'a goodbye still playing at the limit is hung up');

  const silent = call({ greeting: null, timers: { initialSilenceMs: 8_000 } });
  silent.send({ type: 'ANSWERED' });
  silent.clock.advance(8_000);
  t.same(silent.requests, [{ kind: 'goodbye', reason: 'initial_silence' }], 'nobody spoke: goodbye after initial silence');
  const spoke = call({ greeting: null, timers: { initialSilenceMs: 8_000 } });
  spoke.send({ type: 'ANSWERED' });
  spoke.send({ type: 'SPEECH_START' });
  spoke.clock.advance(8_000);
  t.same(spoke.requests, [], 'but not once the caller has spoken');
});

t.test('before the answer, and after the end', async (t) => {
  const ringing = call();
  ringing.send({ type: 'RINGING' });
  ringing.clock.advance(30_000);
  t.equal(ringing.state(), 'no-answer');

  const lost = call();
  lost.clock.advance(CONNECT_TIMEOUT_MS);
  t.equal(lost.state(), 'failed');
  t.equal(lost.snapshot().context.failure, 'The call was not connected within 5 minutes');

  for (const [status, expected] of [['busy', 'busy'], ['no-answer', 'no-answer'], ['failed', 'failed']] as const) {
    const c = call();
    c.send({ type: 'CARRIER_FAILED', status });
    t.equal(c.state(), expected, `carrier ${status}`);
  }
  const hungUp = call();
  hungUp.send({ type: 'CALLER_HUNG_UP' });
  t.equal(hungUp.state(), 'no-answer', 'a hang-up before the answer is no answer');

  const done = call({ greeting: null });
  done.send({ type: 'ANSWERED' });
  done.send({ type: 'CARRIER_COMPLETED' });
  t.equal(done.state(), 'completed');
  for (const event of [{ type: 'ANSWERED' }, { type: 'FAIL', reason: 'x' }, { type: 'TURN', text: 'hi' }, { type: 'END', status: 'ended' }] as CallEvent[]) done.send(event);
  t.equal(done.state(), 'completed', 'a final state takes no further event');
  t.equal(done.snapshot().status, 'done');
});

t.test('voicemail: waits for the beep, then leaves the message; a failed response fails the call', async (t) => {
  const c = call({ greeting: null });
  c.send({ type: 'ANSWERED' });
  c.send({ type: 'VOICEMAIL', hangUp: false, message: 'Please call us back.' });
  t.equal(c.state(), 'in-progress.voicemail.waiting_for_beep');
  c.send({ type: 'INTERRUPT' });
  t.same(c.requests, [], 'not before the beep');
  c.send({ type: 'SPEECH_STOP' });
  t.same(c.requests, [{ kind: 'voicemail', text: 'Please call us back.' }]);
  c.respond({ type: 'RESPONSE_DONE', outcome: {} });
  t.equal(c.state(), 'ended_by_assistant');

  const quiet = call({ greeting: null });
  quiet.send({ type: 'ANSWERED' });
  quiet.send({ type: 'VOICEMAIL', hangUp: false, message: 'Hi' });
  quiet.clock.advance(30_000);
  t.equal(quiet.requests.length, 1, 'a machine that never beeps gets the message after 30 s');

  const hangUp = call({ greeting: null });
  hangUp.send({ type: 'ANSWERED' });
  hangUp.send({ type: 'VOICEMAIL', hangUp: true, message: null });
  t.equal(hangUp.state(), 'ended_by_assistant', 'end_call_on_voicemail hangs up at once');

  const failing = call();
  failing.send({ type: 'ANSWERED' });
  failing.respond({ type: 'RESPONSE_FAILED', reason: 'The TTS failed' });
  t.equal(failing.state(), 'failed');
  t.equal(failing.snapshot().context.failure, 'The TTS failed');
});
