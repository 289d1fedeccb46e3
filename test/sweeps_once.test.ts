/**
 * Periodic sweeps of shared state run once per period however many processes share the database:
 * 1. two processes on one database and one clock: each period's tick of a sweep is won by exactly
 *    one of them, and the winner's next tick falls due a period later;
 * 2. a process whose clock is far behind the shared row (written by a clock ahead of it, or
 *    before the clock was set back) still gets the sweep rather than never again;
 * 3. two whole platforms on one database: the hourly phone-number renewal and the evaluation
 *    sweep run once per period between them, not once in each.
 */
import t, { type Test } from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { createLogger } from '../runtime/logger.js';
import { createDatabasePool } from '../runtime/store/pool.js';
import { createSweepGate } from '../runtime/sweeps.js';
import { freshDatabase } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const HOUR = 60 * 60_000;

async function twoPools(t: Test) {
  const databaseUrl = await freshDatabase();
  const a = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
  const b = await createDatabasePool(databaseUrl, { maximumPoolSize: 2 });
  t.teardown(() => Promise.all([a.end(), b.end()]));
  return { a, b };
}

t.test('each period of a sweep is won by exactly one process', async (t) => {
  const { a, b } = await twoPools(t);
  const clock = new ManualClock();
  const logger = createLogger('silent');
  const gates = [createSweepGate(a, clock, logger), createSweepGate(b, clock, logger)];
  for (let period = 0; period < 4; period++) {
    const won = await Promise.all(gates.map((gate) => gate.due('test-sweep', HOUR)));
    t.equal(won.filter(Boolean).length, 1, `period ${period}: one winner of two`);
    t.same(await Promise.all(gates.map((gate) => gate.due('test-sweep', HOUR))), [false, false], `period ${period}: nobody else until the period is over`);
    clock.advance(HOUR - 1);
    t.same(await Promise.all(gates.map((gate) => gate.due('test-sweep', HOUR))), [false, false], `period ${period}: not a millisecond early`);
    clock.advance(1);
  }
  t.ok(await gates[0]!.due('another-sweep', HOUR), 'sweeps of other names are apart');
});

t.test('a clock far behind the shared row still gets the sweep', async (t) => {
  const { a, b } = await twoPools(t);
  const logger = createLogger('silent');
  const ahead = new ManualClock(Date.UTC(2030, 0, 1));
  const behind = new ManualClock(Date.UTC(2026, 0, 1));
  t.ok(await createSweepGate(a, ahead, logger).due('test-sweep', HOUR), 'the clock ahead takes it first');
  const late = createSweepGate(b, behind, logger);
  t.ok(await late.due('test-sweep', HOUR), 'the clock behind is not shut out until 2030');
  t.notOk(await late.due('test-sweep', HOUR), 'and then keeps to its period');
});

t.test('two platforms on one database renew numbers and sweep evaluations once per period between them', async (t) => {
  const databaseUrl = await freshDatabase();
  const clock = new ManualClock();
  const platforms = [await startTestPlatform(t, { databaseUrl }, { clock }), await startTestPlatform(t, { databaseUrl }, { clock })];
  // The start-up renewals and resumptions of each have run; from here on only the periodic ticks count.
  await Promise.all(platforms.map((p) => p.platform.runtime.settled()));
  await clock.settled();
  const runs = { renewals: 0, evaluations: 0 };
  for (const platform of platforms) {
    const { phoneNumbers, evaluator } = platform.platform.runtime.services;
    const renewDue = phoneNumbers.renewDue.bind(phoneNumbers);
    const sweep = evaluator.sweep.bind(evaluator);
    Object.assign(phoneNumbers, { renewDue: () => (runs.renewals++, renewDue()) });
    Object.assign(evaluator, { sweep: () => (runs.evaluations++, sweep()) });
  }
  for (let hour = 1; hour <= 3; hour++) {
    // Each repeating timer runs at most once per advance (the next is set when a run ends).
    clock.advance(HOUR);
    await clock.settled();
    t.same(runs, { renewals: hour, evaluations: hour }, `after hour ${hour}: each sweep ran once, on one of the two`);
  }
});
