/**
 * The call meter's view of what owners have left: a call's end counts at once, its commit moves
 * the charge into the stored figure, and a database read that overlapped either is dropped.
 */
import t from 'tap';
import { OwnerBalances } from '../runtime/calls/balances.js';

t.test('ends, commits and reads', async (t) => {
  const balances = new OwnerBalances();
  const before = balances.versionOf(7);
  balances.know(7, 1, balances.versionOf(7));
  balances.know(7, 5, before);
  t.equal(balances.available(7), 1, "a start whose read began before the first figure existed does not replace it");
  t.equal(balances.available(8), 0, 'an unknown owner has nothing');

  balances.ended(7, 0.3);
  t.equal(balances.available(7), 0.7, 'an ended call counts before its charge is written');
  const during = balances.snapshot();
  balances.committed(7, 0.3, 0.3);
  t.equal(balances.available(7), 0.7, 'and once, after it is');
  balances.refreshed(during, new Map([[7, 1]]));
  t.equal(balances.available(7), 0.7, 'a read that overlapped the commit is dropped');

  const quiet = balances.snapshot();
  balances.refreshed(quiet, new Map([[7, 0.5]]));
  t.equal(balances.available(7), 0.5, 'a read with nothing local in between is taken (a message was charged meanwhile)');

  balances.ended(7, 0.2);
  const overPending = balances.snapshot();
  balances.refreshed(overPending, new Map([[7, 0.5]]));
  t.equal(balances.available(7), 0.3, 'a charge still being written stays deducted from a fresh read');
  balances.committed(7, 0.2, 0.1);
  t.equal(balances.available(7), 0.4, 'a charge cut short by the balance takes only what it charged');

  const periodic = balances.snapshot();
  const topUp = balances.versionOf(7);
  balances.know(7, 100.4, topUp);
  t.equal(balances.available(7), 100.4, "a call's start reads a top-up: it counts at once for every call of the owner");
  balances.refreshed(periodic, new Map([[7, 0.4]]));
  t.equal(balances.available(7), 100.4, 'a periodic read that began before it does not bring the old figure back');
  const overlapped = balances.versionOf(7);
  balances.ended(7, 1);
  balances.know(7, 100.4, overlapped);
  t.equal(balances.available(7), 99.4, 'a start whose read overlapped a local charge keeps the figure');
  balances.committed(7, 1, 1);

  balances.retain(new Set());
  t.same(balances.ids(), [], 'owners without calls or pending charges are forgotten');
  balances.know(7, 2, balances.versionOf(7));
  t.equal(balances.available(7), 2);
});
