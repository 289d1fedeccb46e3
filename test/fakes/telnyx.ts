import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import type { Test } from 'tap';
import { serveFake } from './http.js';
import { FRAME_SAMPLES } from '../../runtime/voice/audio.js';
import { JsonStreamLine, opened } from '../helpers/phone.js';
import { Conditions } from '../helpers/conditions.js';

/**
 * A local stand-in for Telnyx, speaking its wire protocols:
 * - the TeXML REST API (v2) as the carrier adapter uses it: create a call on a TeXML application
 *   (`POST /v2/texml/calls/{connection_id}`, JSON, answering a flat `{call_sid, from, to, status}`)
 *   and update one (`POST /v2/texml/Accounts/{account_sid}/Calls/{call_sid}`, form-encoded),
 *   bearer-authenticated, errors as `{errors: [{code, title, detail}]}`;
 * - its webhooks, form-encoded and signed with the account's Ed25519 key
 *   (`telnyx-signature-ed25519` over `{telnyx-timestamp}|{body}`);
 * - a phone on the client side of its media-streaming WebSocket (`TelnyxPhone`).
 */

export interface TelnyxRequest {
  readonly path: string;
  readonly authorization: string | undefined;
  readonly contentType: string | undefined;
  /** The JSON body of a create, the form of an update. */
  readonly json?: Record<string, unknown>;
  readonly form?: URLSearchParams;
  /** The call a create made. */
  callSid?: string;
}

export interface FakeTelnyx {
  readonly apiUrl: string;
  readonly apiKey: string;
  readonly accountSid: string;
  readonly connectionId: string;
  /** The account's public key, base64 as the portal shows it (TELNYX_PUBLIC_KEY). */
  readonly publicKey: string;
  readonly requests: TelnyxRequest[];
  /** Resolves once `holds()` is true, looked at as each request is answered (its record complete). */
  answered(holds: () => boolean): Promise<void>;
  /** Answer the next create with this status (e.g. 422 for an invalid number). */
  failNext(status: number): void;
  /** The headers of a webhook with `body`, signed at `atMs` (now by default). */
  signed(body: string, atMs?: number): Record<string, string>;
}

let calls = 0;

/** A call control id as Telnyx writes them (`v3:` and an opaque id). */
export function telnyxCallSid(): string {
  return `v3:${(++calls).toString(36).padStart(8, '0')}-fake-${process.pid}`;
}

export async function startFakeTelnyx(t: Test): Promise<FakeTelnyx> {
  const apiKey = 'KEY0123456789ABCDEF_fake';
  const accountSid = '0f5a2c3e-6a1b-4c7d-9e8f-0123456789ab';
  const connectionId = '1773070540731319841';
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const requests: TelnyxRequest[] = [];
  const arrivals = new Conditions();
  let failure: number | undefined;
  const origin = await serveFake(t, (req, res, raw) => {
    const url = req.url ?? '';
    const contentType = req.headers['content-type'];
    const json = contentType?.startsWith('application/json') ? (JSON.parse(raw || '{}') as Record<string, unknown>) : undefined;
    const form = contentType?.startsWith('application/x-www-form-urlencoded') ? new URLSearchParams(raw) : undefined;
    const request: TelnyxRequest = { path: url, authorization: req.headers.authorization, contentType, json, form };
    requests.push(request);
    const send = (status: number, body: unknown) => {
      arrivals.changed();
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const error = (status: number, code: string, title: string, detail: string) => send(status, { errors: [{ code, title, detail }] });
    if (req.headers.authorization !== `Bearer ${apiKey}`) return error(401, '10009', 'Authentication failed', 'The API key is missing or invalid.');
    if (req.method !== 'POST') return error(404, '10005', 'Resource not found', 'The requested resource was not found.');
    if (url === `/v2/texml/calls/${connectionId}`) {
      if (!json || typeof json.To !== 'string' || typeof json.From !== 'string') return error(422, '10015', 'Invalid parameter', 'From and To are required.');
      if (failure !== undefined) {
        const status = failure;
        failure = undefined;
        return error(status, '10016', 'Invalid phone number', 'The destination number is not a valid phone number.');
      }
      request.callSid = telnyxCallSid();
      return send(200, { call_sid: request.callSid, from: json.From, to: json.To, status: 'queued' });
    }
    const update = new RegExp(`^/v2/texml/Accounts/${accountSid}/Calls/([^/?]+)$`).exec(url);
    if (update && form) {
      const sid = decodeURIComponent(update[1]!);
      return send(200, { account_sid: accountSid, sid, status: form.get('Status') ?? 'in-progress', uri: `/v2/texml/Accounts/${accountSid}/Calls/${sid}.json` });
    }
    error(404, '10005', 'Resource not found', 'The requested resource was not found.');
  });
  return {
    apiUrl: origin,
    apiKey,
    accountSid,
    connectionId,
    publicKey: Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url').toString('base64'),
    requests,
    answered: (holds) => arrivals.until(holds),
    failNext(status) {
      failure = status;
    },
    signed: (body, atMs = Date.now()) => signedHeaders(privateKey, body, atMs),
  };
}

function signedHeaders(privateKey: KeyObject, body: string, atMs: number): Record<string, string> {
  const timestamp = String(Math.floor(atMs / 1000));
  return {
    'content-type': 'application/x-www-form-urlencoded',
    'telnyx-timestamp': timestamp,
    'telnyx-signature-ed25519': sign(null, Buffer.from(`${timestamp}|${body}`), privateKey).toString('base64'),
  };
}

/** The stream a TeXML document connects to: `<Connect><Stream url>`, which must be bidirectional RTP. */
export function texmlStream(texml: string): string {
  const stream = /<Connect><Stream ([^>]*)\/?>/.exec(texml)?.[1];
  const url = stream && /url="([^"]+)"/.exec(stream)?.[1];
  if (!url || !/bidirectionalMode="rtp"/.test(stream)) throw new Error(`no bidirectional stream in TeXML: ${texml}`);
  return url.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

let streams = 0;

/**
 * A phone on Telnyx's side of a media stream (bidirectional, PCMU): it sends `connected`, `start`,
 * `media` frames of 8 kHz mu-law on the inbound track, `dtmf` and `stop`, receives the agent's
 * `media`, `mark` and `clear`, and echoes each mark once the audio before it has been received.
 */
export class TelnyxPhone extends JsonStreamLine {
  readonly streamId = `${(++streams).toString(16).padStart(8, '0')}-53cb-4f27-b3a6-${process.pid.toString(16).padStart(12, '0')}`;
  private sequence = 0;
  private chunk = 0;
  private timestamp = 0;

  constructor(url: string, private readonly call: { callControlId: string; from: string; to: string }) {
    super(url);
  }

  protected receive(message: { event?: unknown; media?: { payload?: unknown }; mark?: { name?: unknown } }): void {
    if (message.event === 'media' && typeof message.media?.payload === 'string') this.hear(message.media.payload);
    else if (message.event === 'mark' && typeof message.mark?.name === 'string') {
      if (this.echoMarks) this.send({ event: 'mark', sequence_number: this.next(), stream_id: this.streamId, mark: { name: message.mark.name } });
      this.emit('mark', message.mark.name);
    } else if (message.event === 'clear') this.emit('clear');
    else this.unexpected.push(message);
  }

  /** Opens the socket (rejects on a refused upgrade) and sends `connected` and `start`. */
  async open(): Promise<void> {
    await opened(this.socket);
    this.send({ event: 'connected', version: '1.0.0' });
    this.send({
      event: 'start',
      sequence_number: this.next(),
      start: {
        user_id: '0f5a2c3e-6a1b-4c7d-9e8f-0123456789ab',
        call_control_id: this.call.callControlId,
        call_session_id: `session-${this.streamId}`,
        from: this.call.from,
        to: this.call.to,
        media_format: { encoding: 'PCMU', sample_rate: 8000, channels: 1 },
      },
      stream_id: this.streamId,
    });
  }

  private next(): string {
    return String(++this.sequence);
  }

  /** One 20 ms frame of the caller's voice (16 kHz PCM16); silence when omitted. */
  speak(frame: Int16Array = new Int16Array(FRAME_SAMPLES)): void {
    const payload = this.encode(frame);
    this.send({ event: 'media', sequence_number: this.next(), media: { track: 'inbound', chunk: String(++this.chunk), timestamp: String(this.timestamp), payload }, stream_id: this.streamId });
    this.timestamp += 20;
  }

  dtmf(digit: string): void {
    this.send({ event: 'dtmf', stream_id: this.streamId, occurred_at: new Date().toISOString(), sequence_number: this.next(), dtmf: { digit } });
  }

  /** The caller hangs up: Telnyx sends `stop` and closes the stream. */
  hangUp(): void {
    this.send({ event: 'stop', sequence_number: this.next(), stop: { user_id: '0f5a2c3e-6a1b-4c7d-9e8f-0123456789ab', call_control_id: this.call.callControlId }, stream_id: this.streamId });
    this.socket.close(1000);
  }
}
