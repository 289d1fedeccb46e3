import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, open, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { CommonQueryMethods } from 'slonik';
import type { Logger } from '../logger.js';
import { sharedSecret } from '../store/secrets.js';
import { FRAME_SAMPLES, SAMPLE_RATE, WAV_HEADER_BYTES, wavHeader } from '../voice/audio.js';

/**
 * Call recordings: a stereo WAV (caller left, agent right, PCM16 16 kHz) written while the call
 * runs, 20 ms at a time in step with the call ticker, through a write stream (a few hundred
 * milliseconds buffered, never the call). The header's sizes are filled in when the call ends.
 * Recordings are served at signed, expiring URLs: HMAC-SHA256 of "call_id.expires" with a key
 * kept in PostgreSQL, shared by every process.
 */

const HEADER_BYTES = WAV_HEADER_BYTES;
const BATCH_FRAMES = 10;
/** Frames waiting for their tick; more than this (a burst) drops the oldest. */
const MAX_PENDING = 50;

/** The recording is stereo: the caller left, the agent right. */
const header = (dataBytes: number) => wavHeader(dataBytes, 2);

export class WavRecorder {
  private stream: WriteStream | undefined;
  private readonly pending: Int16Array[] = [];
  private readonly agentPending: Int16Array[] = [];
  private batch: Buffer[] = [];
  private bytes = 0;
  private failed = false;
  private readonly opened: Promise<void>;

  /** The file is opened once its directory exists (frames wait in the batch meanwhile). */
  constructor(readonly path: string) {
    this.opened = mkdir(dirname(path), { recursive: true }).then(
      () => {
        const stream = createWriteStream(path, { flags: 'w' });
        stream.on('error', () => {
          this.failed = true;
        });
        stream.write(header(0));
        this.stream = stream;
        this.flush();
      },
      () => {
        this.failed = true;
      },
    );
  }

  /** A 20 ms frame of the caller (after it reached the call). */
  caller(frame: Int16Array): void {
    this.pending.push(frame);
    if (this.pending.length > MAX_PENDING) this.pending.shift();
  }

  /** A frame the agent sent (speech, ambient bed or both). */
  agent(frame: Int16Array): void {
    this.agentPending.push(frame);
    if (this.agentPending.length > MAX_PENDING) this.agentPending.shift();
  }

  private nextDue: number | undefined;

  /** Called by the call ticker: writes a 20 ms stereo frame for each 20 ms that passed. */
  tick(now: number): void {
    this.nextDue ??= now;
    while (now >= this.nextDue) {
      this.writeFrame();
      this.nextDue += 20;
    }
  }

  /** One stereo frame: the oldest caller and agent frames not yet written (silence where missing). */
  private writeFrame(): void {
    if (this.failed) return;
    const left = this.pending.shift();
    const right = this.agentPending.shift();
    const out = Buffer.alloc(FRAME_SAMPLES * 4);
    for (let i = 0; i < FRAME_SAMPLES; i++) {
      out.writeInt16LE(left?.[i] ?? 0, i * 4);
      out.writeInt16LE(right?.[i] ?? 0, i * 4 + 2);
    }
    this.batch.push(out);
    this.bytes += out.length;
    if (this.batch.length >= BATCH_FRAMES) this.flush();
  }

  private flush(): void {
    if (!this.stream || this.batch.length === 0) return;
    this.stream.write(Buffer.concat(this.batch));
    this.batch = [];
  }

  /** Finishes the file and fixes its header; resolves with the recorded milliseconds. */
  async close(): Promise<number> {
    await this.opened;
    this.flush();
    const stream = this.stream;
    if (stream) await new Promise<void>((resolve) => stream.end(resolve));
    if (this.failed || !stream) throw new Error(`The recording ${this.path} could not be written`);
    const file = await open(this.path, 'r+');
    try {
      await file.write(header(this.bytes), 0, HEADER_BYTES, 0);
      await file.sync();
    } finally {
      await file.close();
    }
    return (this.bytes / (SAMPLE_RATE * 4)) * 1000;
  }
}

/**
 * The recording of a call whose process stopped without finishing it: the frames that reached the
 * disk are kept (whole stereo frames only) and the header's sizes filled in from them. @returns the
 * path relative to `dir`, or null when there is no recording of the call here (another machine
 * held it, or it was not recorded).
 */
export async function recoverRecording(dir: string, callId: number): Promise<string | null> {
  const name = `${callId}.wav`;
  let file;
  try {
    file = await open(join(dir, name), 'r+');
  } catch {
    return null;
  }
  try {
    const { size } = await file.stat();
    if (size < HEADER_BYTES) return null;
    const dataBytes = size - HEADER_BYTES - ((size - HEADER_BYTES) % 4);
    await file.truncate(HEADER_BYTES + dataBytes);
    await file.write(header(dataBytes), 0, HEADER_BYTES, 0);
    await file.sync();
    return name;
  } finally {
    await file.close();
  }
}

const SECRET_BYTES = 32;
/** Where versions that kept the key per data directory kept it. */
const LEGACY_SECRET_FILE = 'recordings.secret';

/**
 * The key that signs recording URLs, the same for every process on the database (a link one
 * process gives, another serves): made once and kept in PostgreSQL. The first start after an
 * upgrade takes the key of its data directory's `recordings.secret`, so the links it gave stay
 * valid. A key that is not 32 bytes (an empty or short file) stops the start rather than sign with it.
 */
export async function recordingSecret(db: CommonQueryMethods, dataDir: string, logger?: Logger): Promise<Buffer> {
  const path = join(dataDir, LEGACY_SECRET_FILE);
  const secret = await sharedSecret(db, 'recordings', async () => (await legacySecret(path)) ?? randomBytes(SECRET_BYTES));
  if (secret.length !== SECRET_BYTES) throw new Error(`the recording link key in platform_secrets is not ${SECRET_BYTES} bytes`);
  const own = await legacySecret(path).catch(() => null);
  if (own && !own.equals(secret)) logger?.warn({ path }, 'this data directory kept another recording link key; the links given with it no longer open');
  return secret;
}

/** The key of a data directory from before the key was shared; null when there is none. */
async function legacySecret(path: string): Promise<Buffer | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const secret = Buffer.from(text.trim(), 'hex');
  if (secret.length !== SECRET_BYTES) throw new Error(`${path} does not hold a ${SECRET_BYTES}-byte key; remove it to make a new one (existing recording links stop working)`);
  return secret;
}

export const RECORDING_URL_TTL_S = 24 * 3600;

export function signRecording(secret: Buffer, callId: number, expires: number): string {
  return createHmac('sha256', secret).update(`${callId}.${expires}`).digest('hex');
}

/** `{base}/api/recordings/{id}.wav?expires=..&signature=..`, valid for a day from `now`. */
export function recordingUrl(publicUrl: string, secret: Buffer, callId: number, now: number): string {
  const expires = Math.floor(now / 1000) + RECORDING_URL_TTL_S;
  return `${publicUrl}/api/recordings/${callId}.wav?expires=${expires}&signature=${signRecording(secret, callId, expires)}`;
}

export function verifyRecording(secret: Buffer, callId: number, expires: number, signature: string, now: number): boolean {
  if (!Number.isSafeInteger(expires) || expires * 1000 < now) return false;
  const expected = Buffer.from(signRecording(secret, callId, expires));
  const given = Buffer.from(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
