import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenFake } from './http.js';
import type { Test } from 'tap';
import { WebSocket, WebSocketServer } from 'ws';
import { bytesToSamples, levelDb, samplesToBytes } from '../../runtime/voice/audio.js';
import { SAY_EXACTLY } from '../../runtime/voice/providers/types.js';
import { Conditions } from '../helpers/conditions.js';

/**
 * Local stand-ins for the speech vendors, each speaking its wire protocol:
 * - Deepgram live transcription: WebSocket `/v1/listen` (binary linear16; `Results` messages with
 *   interim and final transcripts; `Finalize`, `CloseStream`).
 * - Deepgram pre-recorded transcription: `POST /v1/listen?model=…` with the audio file as the body
 *   (`Token` key; 400 for an empty body or no `Content-Type`), answered with the next utterance in
 *   `results.channels[0].alternatives[0].transcript`.
 * - ElevenLabs streaming TTS: `POST /v1/text-to-speech/{voice}/stream?output_format=pcm_16000`.
 * - OpenAI TTS: `POST /v1/audio/speech` (pcm, 24 kHz).
 * - OpenAI Realtime: WebSocket `/v1/realtime?model=` (session.update, input_audio_buffer.append,
 *   server VAD events, transcription, response.create with audio/text deltas and function calls,
 *   response.cancel, conversation.item.truncate / create).
 * Transcripts come from `utterances` in order ("[de] ..." marks a detected language); realtime
 * answers from `realtimeReplies` in order.
 */

/**
 * A realtime reply: `hang`, the response starts and then sends nothing until it is cancelled;
 * `gates`, audio chunk i + 1 waits for gate i (a response that streams slowly, in the test's time);
 * `late`, the response does not start until the next request arrives (a vendor running behind).
 */
export interface Reply {
  readonly text?: string;
  readonly functionCall?: { name: string; arguments: Record<string, unknown> };
  readonly fail?: boolean;
  readonly hang?: boolean;
  readonly gates?: Promise<void>[];
  readonly late?: boolean;
}

export interface FakeSpeech {
  readonly httpUrl: string;
  readonly wsUrl: string;
  readonly utterances: string[];
  readonly realtimeReplies: Reply[];
  readonly ttsRequests: Array<{ vendor: 'elevenlabs' | 'openai'; path: string; headers: IncomingMessage['headers']; body: any }>;
  readonly deepgramQueries: URLSearchParams[];
  /** Pre-recorded requests, the file as it arrived. */
  readonly deepgramFiles: Array<{ query: URLSearchParams; headers: IncomingMessage['headers']; bytes: Buffer }>;
  readonly deepgramControl: string[];
  /** Resolves once a Deepgram control message of `type` has arrived; at once if one has. */
  deepgramSent(type: string): Promise<void>;
  /** Client events of every realtime session, in order. */
  readonly realtimeEvents: Array<Record<string, any>>;
  readonly realtimeHeaders: IncomingMessage['headers'][];
  /** The open streams, for frames a test writes itself (what a vendor, or a proxy before it, might send). */
  readonly streams: { readonly deepgram: WebSocket[]; readonly realtime: WebSocket[] };
}

const tone = (samples: number, rate: number) => {
  const out = new Int16Array(samples);
  for (let i = 0; i < samples; i++) out[i] = Math.round(Math.sin((2 * Math.PI * 220 * i) / rate) * 8_000);
  return out;
};

export async function startFakeSpeech(t: Test, keys: { deepgram: string; elevenlabs: string; openai: string }): Promise<FakeSpeech> {
  const controls = new Conditions();
  const fake: FakeSpeech = { httpUrl: '', wsUrl: '', utterances: [], realtimeReplies: [], ttsRequests: [], deepgramQueries: [], deepgramFiles: [], deepgramControl: [], deepgramSent: (type) => controls.until(() => fake.deepgramControl.includes(type)), realtimeEvents: [], realtimeHeaders: [], streams: { deepgram: [], realtime: [] } };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      if (url.pathname === '/v1/listen' && req.method === 'POST') return deepgramPrerecorded(req, res, url, Buffer.concat(chunks));
      const raw = Buffer.concat(chunks).toString();
      const body = raw ? JSON.parse(raw) : undefined;
      const eleven = /^\/v1\/text-to-speech\/([^/]+)\/stream$/.exec(url.pathname);
      if (eleven && req.method === 'POST') {
        fake.ttsRequests.push({ vendor: 'elevenlabs', path: url.pathname + url.search, headers: req.headers, body });
        if (req.headers['xi-api-key'] !== keys.elevenlabs) return void res.writeHead(401).end('{"detail":"invalid api key"}');
        const audio = Buffer.from(samplesToBytes(tone(String(body.text).length * 800, 16_000)));
        res.writeHead(200, { 'content-type': 'audio/pcm' });
        for (let offset = 0; offset < audio.length; offset += 3_333) res.write(audio.subarray(offset, offset + 3_333));
        return void res.end();
      }
      if (url.pathname === '/v1/audio/speech' && req.method === 'POST') {
        fake.ttsRequests.push({ vendor: 'openai', path: url.pathname, headers: req.headers, body });
        if (req.headers.authorization !== `Bearer ${keys.openai}`) return void res.writeHead(401).end('{"error":{"message":"bad key"}}');
        const audio = Buffer.from(samplesToBytes(tone(String(body.input).length * 1_200, 24_000)));
        res.writeHead(200, { 'content-type': 'audio/pcm' });
        for (let offset = 0; offset < audio.length; offset += 4_801) res.write(audio.subarray(offset, offset + 4_801));
        return void res.end();
      }
      res.writeHead(404).end();
    });
  });

  const sockets = new WebSocketServer({ noServer: true });
  server.on('upgrade', (req, socket, head) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    if (url.pathname === '/v1/listen') {
      if (req.headers.authorization !== `Token ${keys.deepgram}`) return void socket.end('HTTP/1.1 401 Unauthorized\r\n\r\n');
      fake.deepgramQueries.push(url.searchParams);
      sockets.handleUpgrade(req, socket, head, (ws) => (fake.streams.deepgram.push(ws), deepgram(ws)));
    } else if (url.pathname === '/v1/realtime') {
      if (req.headers.authorization !== `Bearer ${keys.openai}`) return void socket.end('HTTP/1.1 401 Unauthorized\r\n\r\n');
      fake.realtimeHeaders.push(req.headers);
      sockets.handleUpgrade(req, socket, head, (ws) => (fake.streams.realtime.push(ws), realtime(ws)));
    } else socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
  });

  function deepgramPrerecorded(req: IncomingMessage, res: ServerResponse, url: URL, bytes: Buffer): void {
    const requestId = `req-${fake.deepgramFiles.length + 1}`;
    const fail = (status: number, code: string, message: string) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ err_code: code, err_msg: message, request_id: requestId }));
    if (req.headers.authorization !== `Token ${keys.deepgram}`) return fail(401, 'INVALID_AUTH', 'Invalid credentials.');
    if (bytes.length === 0 || !req.headers['content-type']) return fail(400, 'Bad Request', 'Bad Request: failed to process audio: corrupt or unsupported data');
    fake.deepgramFiles.push({ query: url.searchParams, headers: req.headers, bytes });
    const transcript = (fake.utterances.shift() ?? 'hello').replace(/^\[\w\w\] /, '');
    const words = transcript.split(' ').filter(Boolean).map((word, i) => ({ word: word.toLowerCase(), start: i * 0.4, end: i * 0.4 + 0.35, confidence: 0.98, punctuated_word: word }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
      metadata: { request_id: requestId, created: new Date().toISOString(), duration: words.length * 0.4, channels: 1, models: ['fake-nova-3'] },
      results: { channels: [{ alternatives: [{ transcript, confidence: transcript ? 0.98 : 0, words }] }] },
    }));
  }

  function deepgram(ws: WebSocket): void {
    let active: { words: string[]; language: string | undefined; frames: number } | undefined;
    const results = (text: string, final: boolean, language?: string) =>
      ws.send(JSON.stringify({ type: 'Results', is_final: final, speech_final: final, channel: { alternatives: [{ transcript: text, confidence: 0.98, ...(language ? { languages: [language] } : {}) }] } }));
    ws.on('message', (data, isBinary) => {
      if (!isBinary) {
        const message = JSON.parse(data.toString()) as { type: string };
        fake.deepgramControl.push(message.type);
        controls.changed();
        if (message.type === 'Finalize' && active) {
          results(active.words.join(' '), true, active.language);
          active = undefined;
        }
        if (message.type === 'CloseStream') ws.close(1000);
        return;
      }
      const frame = bytesToSamples(new Uint8Array(data as Buffer));
      if (levelDb(frame) < -40) return;
      if (!active) {
        const next = fake.utterances.shift() ?? 'hello';
        const language = /^\[(\w\w)\] /.exec(next)?.[1];
        active = { words: next.replace(/^\[\w\w\] /, '').split(' '), language, frames: 0 };
      }
      active.frames++;
      if (active.frames % 5 === 0) results(active.words.slice(0, Math.min(active.words.length, active.frames / 5)).join(' '), false, active.language);
    });
  }

  function realtime(ws: WebSocket): void {
    let silenceMs = 500;
    let speaking = false;
    let quiet = 0;
    let items = 0;
    /** The response in progress; a cancel ends it with `response.done` (status cancelled), as OpenAI does. */
    let inProgress: string | undefined;
    const send = (event: Record<string, unknown>) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify(event));
    const finish = (id: string, status: string, details?: Record<string, unknown>) => {
      if (inProgress !== id) return;
      inProgress = undefined;
      send({ type: 'response.done', response: { id, status, ...(details ? { status_details: details } : {}) } });
    };
    let deferred: { event: Record<string, any>; reply: Reply } | undefined;
    function respond(event: Record<string, any>, reply: Reply): void {
      const id = `resp_${++items}`;
      const itemId = `item_out_${items}`;
      inProgress = id;
      send({ type: 'response.created', response: { id, status: 'in_progress', metadata: event.response?.metadata ?? null } });
      if (reply.hang) return;
      if (reply.fail) return finish(id, 'failed', { type: 'failed', error: { type: 'server_error', message: 'injected' } });
      if (reply.functionCall) {
        send({ type: 'response.function_call_arguments.done', response_id: id, item_id: itemId, call_id: `call_${items}`, name: reply.functionCall.name, arguments: JSON.stringify(reply.functionCall.arguments) });
        return finish(id, 'completed');
      }
      const text = reply.text ?? '';
      const gates = [...(reply.gates ?? [])];
      send({ type: 'response.output_item.added', response_id: id, item: { id: itemId, type: 'message', role: 'assistant' } });
      const textOnly = JSON.stringify(fake.realtimeEvents.findLast((e) => e.type === 'session.update')?.session?.modalities) === '["text"]';
      if (textOnly) {
        send({ type: 'response.text.delta', response_id: id, item_id: itemId, delta: text });
        return finish(id, 'completed');
      }
      send({ type: 'response.audio_transcript.delta', response_id: id, item_id: itemId, delta: text });
      const audio = Buffer.from(samplesToBytes(tone(text.length * 1_200, 24_000)));
      void (async () => {
        for (let offset = 0; offset < audio.length && inProgress === id; offset += 9_600) {
          if (offset > 0 && gates.length > 0) await gates.shift();
          if (inProgress === id) send({ type: 'response.audio.delta', response_id: id, item_id: itemId, delta: audio.subarray(offset, offset + 9_600).toString('base64') });
        }
        finish(id, 'completed');
      })();
    }
    send({ type: 'session.created', session: { id: 'sess_fake' } });
    ws.on('message', (data) => {
      const event = JSON.parse(data.toString()) as Record<string, any>;
      if (event.type !== 'input_audio_buffer.append') fake.realtimeEvents.push(event);
      switch (event.type) {
        case 'session.update':
          silenceMs = event.session?.turn_detection?.silence_duration_ms ?? 500;
          return send({ type: 'session.updated', session: event.session });
        case 'input_audio_buffer.append': {
          const samples = bytesToSamples(Buffer.from(event.audio, 'base64'));
          const loud = levelDb(samples) > -40;
          if (loud && !speaking) {
            speaking = true;
            send({ type: 'input_audio_buffer.speech_started', audio_start_ms: 0, item_id: `item_in_${++items}` });
          }
          quiet = loud ? 0 : quiet + (samples.length / 24_000) * 1000;
          if (speaking && quiet >= silenceMs) {
            speaking = false;
            send({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: 0, item_id: `item_in_${items}` });
            send({ type: 'conversation.item.input_audio_transcription.completed', item_id: `item_in_${items}`, content_index: 0, transcript: fake.utterances.shift() ?? 'hello' });
          }
          return;
        }
        case 'response.cancel':
          if (inProgress) finish(inProgress, 'cancelled', { type: 'cancelled', reason: 'client_cancelled' });
          return;
        case 'response.create': {
          const instructions: string = event.response?.instructions ?? '';
          const reply: Reply = instructions.startsWith(SAY_EXACTLY) ? { text: instructions.slice(SAY_EXACTLY.length).replace(/^"|"$/g, '') } : fake.realtimeReplies.shift() ?? { text: 'Fake realtime answer.' };
          if (reply.late) {
            // Not started until the next request arrives, as a vendor running behind would.
            deferred = { event, reply };
            return;
          }
          if (deferred) {
            const earlier = deferred;
            deferred = undefined;
            respond(earlier.event, earlier.reply);
          }
          return respond(event, reply);
        }
        default:
      }
    });
  }

  const origin = await listenFake(t, server, sockets);
  return Object.assign(fake, { httpUrl: origin, wsUrl: origin.replace(/^http/, 'ws') });
}
