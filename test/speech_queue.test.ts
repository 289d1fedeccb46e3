/**
 * A response's speech queue: segments in order; a failing one is kept until the response is done
 * (never an unhandled rejection, which would end the process and every call in it), and the
 * segments after it are skipped.
 */
import t from 'tap';
import { SpeechQueue } from '../runtime/voice/speaking/speechQueue.js';

t.test('a failed segment waits for done() and stops the rest', async (t) => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => void process.off('unhandledRejection', onUnhandled));

  const spoken: string[] = [];
  const queue = new SpeechQueue();
  queue.add(async () => void spoken.push('one'));
  queue.add(async () => {
    throw new Error('the voice vendor answered 500');
  });
  queue.add(async () => void spoken.push('three'));
  // The model is still writing: a turn of the event loop passes with nobody awaiting the queue
  // (Node reports a rejection left unhandled before the turn ends).
  await new Promise((resolve) => setImmediate(resolve));
  t.same(unhandled, [], 'no unhandled rejection while the response is being written');
  await t.rejects(queue.done(), /the voice vendor answered 500/);
  t.same(spoken, ['one'], 'the segments after the failure were skipped');
});

t.test('all segments in order', async (t) => {
  const spoken: number[] = [];
  const queue = new SpeechQueue();
  for (let i = 0; i < 5; i++) queue.add(async () => void spoken.push(i));
  await queue.done();
  t.same(spoken, [0, 1, 2, 3, 4]);
});
