import { execFileSync, spawnSync } from 'node:child_process';

/**
 * The two programs the speech corpus is made with (Debian packages `espeak-ng` and `sox`). Audio
 * between them and the builder is raw PCM16 little-endian, mono, 8 kHz: the phone's rate.
 */

export const CORPUS_RATE = 8_000;

/** Why the corpus cannot be built here (a program missing), or undefined when it can. */
export function missingCorpusTools(): string | undefined {
  const missing = ['espeak-ng', 'sox'].filter((program) => spawnSync(program, ['--version'], { stdio: 'ignore' }).error !== undefined);
  return missing.length ? `${missing.join(' and ')} not installed (apt-get install espeak-ng sox)` : undefined;
}

/** The tools' versions, part of the corpus's cache key (another espeak-ng speaks differently). */
export function toolVersions(): string {
  const first = (program: string, args: string[]) => execFileSync(program, args, { encoding: 'utf8' }).split('\n')[0]!.trim();
  return `${first('espeak-ng', ['--version'])} / ${first('sox', ['--version'])}`;
}

const RAW = ['-t', 'raw', '-r', String(CORPUS_RATE), '-e', 'signed', '-b', '16', '-c', '1'];

function samples(bytes: Buffer): Int16Array {
  const copy = Buffer.from(bytes);
  return new Int16Array(copy.buffer, copy.byteOffset, copy.length >> 1);
}

/** `text` spoken by espeak-ng's `voice` (e.g. `en-us+m3`) at `rate` words per minute, at 8 kHz. */
export function speak(text: string, voice: string, rate: number): Int16Array {
  const wav = execFileSync('espeak-ng', ['-v', voice, '-s', String(rate), '--stdout', text], { maxBuffer: 64 << 20 });
  return samples(execFileSync('sox', ['-V1', '-t', 'wav', '-', ...RAW, '-'], { input: wav, maxBuffer: 64 << 20 }));
}

/** A sound sox makes from nothing: `synth` and effect arguments after `sox -n ... -`. */
export function synthesize(effects: string[]): Int16Array {
  return samples(execFileSync('sox', ['-V1', '-n', ...RAW, '-', ...effects], { maxBuffer: 64 << 20 }));
}

/** Audio through the telephone band (300-3,400 Hz) and G.711 mu-law, as a carrier delivers it. */
export function phoneBand(audio: Int16Array): Uint8Array {
  const input = Buffer.from(audio.buffer, audio.byteOffset, audio.byteLength);
  return execFileSync('sox', ['-V1', ...RAW, '-', '-t', 'raw', '-r', String(CORPUS_RATE), '-e', 'mu-law', '-b', '8', '-c', '1', '-', 'sinc', '300-3400'], { input, maxBuffer: 64 << 20 });
}
