import { createServer, type IncomingMessage } from 'node:http';
import { listenFake } from './http.js';
import type { Test } from 'tap';
import { WebSocket, WebSocketServer } from 'ws';
import { bytesToSamples, levelDb } from '../../runtime/voice/audio.js';
import { Conditions } from '../helpers/conditions.js';

/**
 * A local OpenAI-compatible transcription server, speaking the wire formats:
 * - `POST /v1/audio/transcriptions` (and an Azure OpenAI deployment's
 *   `/openai/deployments/{name}/audio/transcriptions?api-version=`): multipart form data, `file` a
 *   WAV (refused with 400 unless RIFF/WAVE PCM16 mono 16 kHz with a `data` chunk of the right
 *   size), `model` required, `language` and `response_format` (`json` → `{text}`,
 *   `verbose_json` → `{text, language, duration}`); a wrong key → 401 with OpenAI's error body.
 * - WebSocket `/v1/realtime?intent=transcription`: `transcription_session.update`,
 *   `input_audio_buffer.append` (pcm16 24 kHz, base64), `.commit` (an error event
 *   `input_audio_buffer_commit_empty` under 100 ms), `.clear`; answers `input_audio_buffer.committed`,
 *   then `conversation.item.input_audio_transcription.delta` word by word and `.completed`.
 * Each request, or each commit holding speech, is answered with the next of `utterances`
 * ("mm-hmm" when none is left); a commit without speech with "".
 * With `anyAudio`, a request's `file` may be any format OpenAI takes, told (as OpenAI does) by its
 * name's extension (400 otherwise); such requests are kept in `files`, not `requests`.
 */

export interface ReceivedWav {
  readonly sampleRate: number;
  readonly channels: number;
  readonly bitsPerSample: number;
  readonly durationMs: number;
  /** Milliseconds of 20 ms frames louder than -40 dBFS. */
  readonly loudMs: number;
}

export interface TranscriptionRequest {
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  /** The form's text fields. */
  readonly fields: Record<string, string>;
  readonly file: { readonly filename: string; readonly contentType: string; readonly wav: ReceivedWav };
}

/** A request of a fake started with `anyAudio`: the file as it arrived. */
export type AudioFileRequest = Omit<TranscriptionRequest, 'file'> & { readonly file: { readonly filename: string; readonly contentType: string; readonly bytes: Buffer } };

/** The extensions OpenAI's `/audio/transcriptions` takes. */
const OPENAI_AUDIO = ['flac', 'mp3', 'mp4', 'mpeg', 'mpga', 'm4a', 'ogg', 'wav', 'webm'];

export interface FakeTranscriber {
  /** `http://127.0.0.1:PORT/v1` */
  readonly baseUrl: string;
  /** `ws://127.0.0.1:PORT/v1/realtime` */
  readonly realtimeUrl: string;
  readonly origin: string;
  readonly utterances: string[];
  readonly requests: TranscriptionRequest[];
  /** Requests with any audio file (`anyAudio`). */
  readonly files: AudioFileRequest[];
  /** Requests refused as malformed, with why. */
  readonly refused: string[];
  /** Client events of the realtime sessions (appends counted, not kept). */
  readonly realtimeEvents: Array<Record<string, any>>;
  readonly realtimeHeaders: Array<IncomingMessage['headers']>;
  /** Milliseconds of audio appended to realtime sessions. */
  appendedMs: number;
  /** Transcription requests are taken and never answered (a server that hangs). */
  stall: boolean;
  /** Resolves once `count` transcription requests have been answered. */
  answered(count: number): Promise<void>;
  /** Resolves once a realtime client event of `type` has arrived. */
  realtimeSent(type: string): Promise<void>;
}

/** A multipart/form-data body's parts (RFC 7578), as a server reads them. */
export function parseMultipart(body: Buffer, contentType: string): Array<{ name: string; filename?: string; contentType?: string; data: Buffer }> {
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType);
  if (!boundary) throw new Error('no multipart boundary');
  const delimiter = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
  const parts: Array<{ name: string; filename?: string; contentType?: string; data: Buffer }> = [];
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(delimiter, start);
    if (next < 0) throw new Error('an unterminated part');
    const part = body.subarray(start + 2, next - 2);
    const split = part.indexOf('\r\n\r\n');
    const head = part.subarray(0, split).toString();
    const disposition = /content-disposition: *form-data; *name="([^"]*)"(?:; *filename="([^"]*)")?/i.exec(head);
    if (!disposition) throw new Error('a part without its form-data disposition');
    const type = /content-type: *([^\r\n]+)/i.exec(head)?.[1];
    parts.push({ name: disposition[1]!, ...(disposition[2] !== undefined ? { filename: disposition[2] } : {}), ...(type ? { contentType: type } : {}), data: part.subarray(split + 4) });
    at = next;
  }
  return parts;
}

/** A WAV file's format, or why it is not one a Whisper server takes as it is (PCM16 mono 16 kHz). */
export function readWav(file: Buffer): ReceivedWav | string {
  if (file.length < 44 || file.toString('ascii', 0, 4) !== 'RIFF' || file.toString('ascii', 8, 12) !== 'WAVE') return 'not a RIFF/WAVE file';
  if (file.readUInt32LE(4) !== file.length - 8) return 'RIFF size does not match the file';
  if (file.toString('ascii', 12, 16) !== 'fmt ' || file.readUInt16LE(20) !== 1) return 'not PCM';
  const channels = file.readUInt16LE(22);
  const sampleRate = file.readUInt32LE(24);
  const bitsPerSample = file.readUInt16LE(34);
  if (file.readUInt32LE(28) !== sampleRate * channels * (bitsPerSample / 8)) return 'byte rate does not match the format';
  if (file.toString('ascii', 36, 40) !== 'data' || file.readUInt32LE(40) !== file.length - 44) return 'data chunk size does not match the file';
  if (channels !== 1 || sampleRate !== 16_000 || bitsPerSample !== 16) return `expected mono 16 kHz PCM16, got ${channels} ch ${sampleRate} Hz ${bitsPerSample} bit`;
  const samples = bytesToSamples(new Uint8Array(file.subarray(44)));
  let loudMs = 0;
  for (let i = 0; i + 320 <= samples.length; i += 320) if (levelDb(samples.subarray(i, i + 320)) > -40) loudMs += 20;
  return { sampleRate, channels, bitsPerSample, durationMs: (samples.length / sampleRate) * 1000, loudMs };
}

const openAiError = (message: string, code: string | null, type = 'invalid_request_error') => JSON.stringify({ error: { message, type, param: null, code } });

export async function startFakeTranscriber(t: Test, keys: { openai?: string; azure?: string }, options: { anyAudio?: boolean } = {}): Promise<FakeTranscriber> {
  const arrivals = new Conditions();
  let answers = 0;
  const fake: FakeTranscriber = {
    baseUrl: '',
    realtimeUrl: '',
    origin: '',
    utterances: [],
    requests: [],
    files: [],
    refused: [],
    realtimeEvents: [],
    realtimeHeaders: [],
    appendedMs: 0,
    stall: false,
    answered: (count) => arrivals.until(() => answers >= count),
    realtimeSent: (type) => arrivals.until(() => fake.realtimeEvents.some((e) => e.type === type)),
  };
  const next = () => fake.utterances.shift() ?? 'mm-hmm';

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const azure = /^\/openai\/deployments\/[^/]+\/audio\/transcriptions$/.test(url.pathname);
      const answer = (status: number, body: string) => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(body);
        answers++;
        arrivals.changed();
      };
      if (req.method !== 'POST' || (url.pathname !== '/v1/audio/transcriptions' && !azure)) return void res.writeHead(404).end();
      if (azure ? req.headers['api-key'] !== keys.azure || !url.searchParams.get('api-version') : keys.openai !== undefined && req.headers.authorization !== `Bearer ${keys.openai}`) {
        return answer(401, openAiError('Incorrect API key provided: sk-wr***ey.', 'invalid_api_key'));
      }
      const refuse = (why: string) => {
        fake.refused.push(why);
        answer(400, openAiError(why, null));
      };
      let parts: ReturnType<typeof parseMultipart>;
      try {
        parts = parseMultipart(Buffer.concat(chunks), req.headers['content-type'] ?? '');
      } catch (error) {
        return refuse(`malformed multipart body: ${(error as Error).message}`);
      }
      const fields = Object.fromEntries(parts.filter((p) => p.filename === undefined).map((p) => [p.name, p.data.toString()]));
      const file = parts.find((p) => p.name === 'file' && p.filename !== undefined);
      if (!file) return refuse('file is required');
      if (!fields.model) return refuse('model is required');
      const received = { path: url.pathname + url.search, headers: req.headers, fields };
      /** A file of another format is taken to last a second. */
      let durationMs = 1_000;
      if (options.anyAudio) {
        const extension = /\.([a-z0-9]+)$/i.exec(file.filename!)?.[1]?.toLowerCase() ?? '';
        if (!OPENAI_AUDIO.includes(extension)) return refuse(`Invalid file format. Supported formats: ${JSON.stringify(OPENAI_AUDIO)}`);
        fake.files.push({ ...received, file: { filename: file.filename!, contentType: file.contentType ?? '', bytes: file.data } });
      } else {
        const wav = readWav(file.data);
        if (typeof wav === 'string') return refuse(`invalid file: ${wav}`);
        fake.requests.push({ ...received, file: { filename: file.filename!, contentType: file.contentType ?? '', wav } });
        durationMs = wav.durationMs;
      }
      if (fake.stall) return;
      const text = next();
      const format = fields.response_format ?? 'json';
      if (format === 'json') return answer(200, JSON.stringify({ text, usage: { type: 'duration', seconds: Math.ceil(durationMs / 1000) } }));
      if (format === 'verbose_json') return answer(200, JSON.stringify({ task: 'transcribe', language: 'english', duration: durationMs / 1000, text, segments: [] }));
      return refuse(`response_format ${format} is not served by this fake`);
    });
  });

  const sockets = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    if (url.pathname !== '/v1/realtime' || url.searchParams.get('intent') !== 'transcription') return void socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
    if (keys.openai !== undefined && req.headers.authorization !== `Bearer ${keys.openai}`) return void socket.end('HTTP/1.1 401 Unauthorized\r\n\r\n');
    fake.realtimeHeaders.push(req.headers);
    sockets.handleUpgrade(req, socket, head, (ws) => realtime(ws));
  });

  function realtime(ws: WebSocket): void {
    let bufferMs = 0;
    let loud = false;
    let items = 0;
    let previous: string | null = null;
    const send = (event: Record<string, unknown>) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify(event));
    send({ type: 'transcription_session.created', session: { id: 'sess_fake', object: 'realtime.transcription_session' } });
    ws.on('message', (data) => {
      const event = JSON.parse(data.toString()) as Record<string, any>;
      if (event.type === 'input_audio_buffer.append') {
        const samples = bytesToSamples(new Uint8Array(Buffer.from(String(event.audio), 'base64')));
        bufferMs += (samples.length / 24_000) * 1000;
        fake.appendedMs += (samples.length / 24_000) * 1000;
        if (levelDb(samples) > -40) loud = true;
        return;
      }
      fake.realtimeEvents.push(event);
      arrivals.changed();
      switch (event.type) {
        case 'transcription_session.update':
          return send({ type: 'transcription_session.updated', session: event.session });
        case 'input_audio_buffer.clear':
          bufferMs = 0;
          loud = false;
          return send({ type: 'input_audio_buffer.cleared' });
        case 'input_audio_buffer.commit': {
          if (bufferMs < 100) {
            return send({ type: 'error', error: { type: 'invalid_request_error', code: 'input_audio_buffer_commit_empty', message: `Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has ${bufferMs.toFixed(2)}ms of audio.`, param: null, event_id: event.event_id ?? null } });
          }
          const itemId = `item_${++items}`;
          send({ type: 'input_audio_buffer.committed', previous_item_id: previous, item_id: itemId });
          previous = itemId;
          const text = loud ? next() : '';
          bufferMs = 0;
          loud = false;
          const words = text.split(' ').filter(Boolean);
          words.forEach((word, i) => send({ type: 'conversation.item.input_audio_transcription.delta', item_id: itemId, content_index: 0, delta: i === 0 ? word : ` ${word}` }));
          send({ type: 'conversation.item.input_audio_transcription.completed', item_id: itemId, content_index: 0, transcript: text });
          answers++;
          arrivals.changed();
          return;
        }
        default:
      }
    });
  }

  const origin = await listenFake(t, server, sockets);
  return Object.assign(fake, { origin, baseUrl: `${origin}/v1`, realtimeUrl: `${origin.replace(/^http/, 'ws')}/v1/realtime` });
}
