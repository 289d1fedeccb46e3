/**
 * The call ticker (`LiveCalls`), over stand-in sessions on a manual clock:
 * 1. a meter that throws on a tick is logged, and every call's frames still go out on that tick
 *    and the next ones;
 * 2. a call that fails on its tick and cannot even be ended is taken out and handed to the
 *    lifecycle (`abandoned`), its recording closed; the other calls go on.
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { LiveCalls, type LiveCall } from '../runtime/calls/registry.js';
import { ManualClock } from '../runtime/clock.js';
import { createLogger } from '../runtime/logger.js';
import type { CallSession } from '../runtime/voice/session.js';
import type { CallTransport } from '../runtime/voice/spec.js';

/** A session that counts its ticks; `fail` makes its tick (and its end) throw. */
function standIn(callId: number, fail = { tick: false, send: false }) {
  const session = {
    spec: { callId },
    ticks: 0,
    currentStatus: 'in-progress',
    attach: () => undefined,
    tick() {
      if (fail.tick) throw new Error('tick broke');
      session.ticks++;
    },
    send() {
      if (fail.send) throw new Error('the actor is gone');
    },
  };
  return session;
}

function liveCall(session: ReturnType<typeof standIn>, record = false): LiveCall {
  return { session: session as unknown as CallSession, record, attached: false, lastMediaAt: 0, heardAt: null, mode: 'pipeline', tokenUsed: true, tokenExpires: 0 } as unknown as LiveCall;
}

const transport = { send: () => undefined, clear: () => undefined, mark: () => undefined, close: () => undefined } as unknown as CallTransport;

t.test('a meter that throws does not stop the calls', async (t) => {
  const clock = new ManualClock();
  const errors: string[] = [];
  let meterTicks = 0;
  const calls = new LiveCalls({
    clock,
    logger: createLogger('error', { write: (line: string) => errors.push(JSON.parse(line).msg) }),
    recordingsDir: tmpdir(),
    onTick: () => {
      if (meterTicks++ === 0) throw new Error('meter broke');
    },
    abandoned: () => t.fail('nothing is abandoned'),
  });
  t.teardown(() => calls.stop());
  const a = standIn(1);
  const b = standIn(2);
  for (const session of [a, b]) {
    calls.add(liveCall(session));
    calls.attach(session as unknown as CallSession, transport);
  }
  clock.advance(100);
  t.ok(meterTicks > 10, `the meter ran on every tick (${meterTicks})`);
  t.equal(a.ticks, meterTicks, 'the first call ticked on every tick, the failed one too');
  t.equal(b.ticks, meterTicks, 'so did the second');
  t.same(errors, ['the meter failed on a tick'], 'the failure is logged once');
});

t.test('a call that cannot be ended is abandoned to the sweep with its recording closed', async (t) => {
  const clock = new ManualClock();
  const dir = await mkdtemp(join(tmpdir(), 'ap-ticker-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const abandoned: LiveCall[] = [];
  const calls = new LiveCalls({ clock, logger: createLogger('silent'), recordingsDir: dir, onTick: () => undefined, abandoned: (call) => abandoned.push(call) });
  t.teardown(() => calls.stop());
  const broken = standIn(1, { tick: true, send: true });
  const healthy = standIn(2);
  for (const [session, record] of [[broken, true], [healthy, false]] as const) {
    calls.add(liveCall(session, record));
    calls.attach(session as unknown as CallSession, transport);
  }
  const recorder = calls.get(1)!.recorder!;
  let closing: Promise<number> | undefined;
  const close = recorder.close.bind(recorder);
  recorder.close = () => (closing = close());
  clock.advance(50);
  t.equal(abandoned.length, 1, 'handed to the lifecycle once');
  t.equal(abandoned[0]!.session.spec.callId, 1);
  t.notOk(calls.has(1), 'no longer held (its heartbeat stops, so the sweep takes it)');
  t.ok(healthy.ticks >= 9, `the other call goes on (${healthy.ticks} ticks)`);
  t.ok(closing, 'its recording is being closed');
  await closing;
  t.ok((await stat(join(dir, '1.wav'))).size >= 44, 'as a WAV file the sweep can keep');
});
