/**
 * The call recorder: its file is opened only once its directory exists (the first recording of a
 * fresh data directory used to race the directory's creation and was lost), and holds every frame.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { WavRecorder } from '../runtime/calls/recording.js';
import { FRAME_SAMPLES } from '../runtime/voice/audio.js';

t.test('a recording into directories that do not exist yet', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'ap-recorder-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const recorders = Array.from({ length: 20 }, (_, i) => new WavRecorder(join(root, `d${i}`, 'e', 'f', `${i}.wav`)));
  for (const recorder of recorders) {
    recorder.caller(new Int16Array(FRAME_SAMPLES).fill(1000));
    recorder.tick(0);
    recorder.tick(100);
  }
  const lengths = await Promise.all(recorders.map((recorder) => recorder.close()));
  t.same(lengths, recorders.map(() => 120), 'six frames each');
  const wav = await readFile(join(root, 'd0', 'e', 'f', '0.wav'));
  t.equal(wav.length, 44 + 6 * FRAME_SAMPLES * 4);
  t.equal(wav.readInt16LE(44), 1000, 'the caller on the left');
});
