/**
 * The key that signs recording links: made once per data directory, the same for processes
 * starting together, and never short or empty (a damaged one stops the start).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { recordingSecret } from '../runtime/calls/recording.js';

t.test('one 32-byte key per data directory, also when made concurrently', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ap-secret-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const keys = await Promise.all(Array.from({ length: 8 }, () => recordingSecret(dir)));
  t.equal(keys[0]!.length, 32);
  t.ok(keys.every((key) => key.equals(keys[0]!)), 'every starter reads the same key');
  t.ok((await recordingSecret(dir)).equals(keys[0]!), 'and so does the next start');
});

t.test('an empty or short key stops the start instead of signing with it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'ap-secret-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'recordings.secret'), '');
  await t.rejects(recordingSecret(dir), /does not hold a 32-byte key/);
  await writeFile(join(dir, 'recordings.secret'), 'abcd');
  await t.rejects(recordingSecret(dir), /does not hold a 32-byte key/);
});
