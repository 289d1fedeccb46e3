import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import { serveFake } from './http.js';
import { FRAME_SAMPLES } from '../../runtime/voice/audio.js';
import { JsonStreamLine, opened } from '../helpers/phone.js';
import { Conditions } from '../helpers/conditions.js';

/**
 * A local stand-in for Plivo, speaking its wire protocols:
 * - the Call API (v1) as the carrier adapter uses it, JSON with HTTP basic auth: make a call
 *   (`POST /v1/Account/{auth_id}/Call/`, answering `201 {message, request_uuid, api_id}`),
 *   transfer one (`POST .../Call/{call_uuid}/` with `legs`, `aleg_url`: the fake fetches the new
 *   XML there, signed, as Plivo does, before it answers 202) and hang one up
 *   (`DELETE .../Call/{call_uuid}/`, 204); errors as `{api_id, error}`;
 * - its webhooks, form-encoded and signed with `X-Plivo-Signature-V3` and its nonce;
 * - a phone on Plivo's side of an Audio Stream (`PlivoPhone`).
 */

export interface PlivoRequest {
  readonly method: string;
  readonly path: string;
  readonly authorization: string | undefined;
  readonly json: Record<string, unknown> | undefined;
  /** The call a make-call request created. */
  requestUuid?: string;
  /** The XML a transfer fetched from its `aleg_url`. */
  transferXml?: string;
}

export interface FakePlivo {
  readonly apiUrl: string;
  readonly authId: string;
  readonly authToken: string;
  readonly requests: PlivoRequest[];
  /** Resolves once `holds()` is true, looked at as each request is answered (its record complete). */
  answered(holds: () => boolean): Promise<void>;
  /** Answer the next make-call request with this status (e.g. 400 for an invalid number). */
  failNext(status: number): void;
  /** The headers of a webhook to `url` with `params`, signed over `signedParams` (`params` by default). */
  signed(url: string, params: URLSearchParams, signedParams?: URLSearchParams): Record<string, string>;
  /** Plivo fetching a document: a signed, form-encoded POST; resolves with its body (XML). */
  fetchXml(url: string, fields: Record<string, string>): Promise<string>;
}

/**
 * V3 as Plivo's SDKs build it (written out here apart from the platform's own): the URL without
 * its query, `?` and the sorted `name=value` query pairs, a `.` between those and the sorted
 * `namevalue` body pairs when both exist, then `.` and the nonce; HMAC-SHA256, base64.
 */
export function plivoV3(authToken: string, url: string, params: URLSearchParams, nonce: string): string {
  const { origin, pathname, searchParams } = new URL(url);
  const sorted = (pairs: URLSearchParams) => [...pairs].sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0));
  const query = sorted(searchParams).map(([name, value]) => `${name}=${value}`).join('&');
  const body = sorted(params).map(([name, value]) => name + value).join('');
  const hasBody = [...params].length > 0;
  let base = origin + pathname;
  if (query.length > 0 || hasBody) base += `?${query}`;
  if (query.length > 0 && hasBody) base += '.';
  return createHmac('sha256', authToken).update(`${base}${body}.${nonce}`).digest('base64');
}

export async function startFakePlivo(t: Test): Promise<FakePlivo> {
  const authId = 'MAZDQ1ZJIYMDZKMTSZMT';
  const authToken = 'plivo-auth-token-0123456789abcdef';
  const requests: PlivoRequest[] = [];
  const arrivals = new Conditions();
  let failure: number | undefined;
  const signed: FakePlivo['signed'] = (url, params, signedParams = params) => {
    const nonce = randomBytes(10).toString('hex');
    return { 'content-type': 'application/x-www-form-urlencoded', 'x-plivo-signature-v3': plivoV3(authToken, url, signedParams, nonce), 'x-plivo-signature-v3-nonce': nonce };
  };
  async function fetchXml(url: string, fields: Record<string, string>): Promise<string> {
    const params = new URLSearchParams(fields);
    const response = await fetch(url, { method: 'POST', headers: signed(url, params), body: params.toString() });
    const text = await response.text();
    if (!response.ok) throw new Error(`${url} answered ${response.status}: ${text}`);
    return text;
  }
  const origin = await serveFake(t, (req, res, raw) => {
    const path = req.url ?? '';
    const json = req.headers['content-type']?.startsWith('application/json') ? (JSON.parse(raw || '{}') as Record<string, unknown>) : undefined;
    const request: PlivoRequest = { method: req.method ?? '', path, authorization: req.headers.authorization, json };
    requests.push(request);
    const apiId = randomUUID();
    const send = (status: number, body?: unknown) => {
      arrivals.changed();
      res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
      res.end(body === undefined ? undefined : JSON.stringify({ api_id: apiId, ...(body as object) }));
    };
    if (req.headers.authorization !== `Basic ${Buffer.from(`${authId}:${authToken}`).toString('base64')}`) return send(401, { error: 'authentication failed' });
    const calls = `/v1/Account/${authId}/Call/`;
    if (req.method === 'POST' && path === calls) {
      if (!json || typeof json.from !== 'string' || typeof json.to !== 'string' || typeof json.answer_url !== 'string') return send(400, { error: 'from, to and answer_url are required' });
      if (failure !== undefined) {
        const status = failure;
        failure = undefined;
        return send(status, { error: 'invalid destination number' });
      }
      request.requestUuid = randomUUID();
      return send(201, { message: 'call fired', request_uuid: request.requestUuid });
    }
    const one = new RegExp(`^${calls}([0-9a-f-]{36})/$`).exec(path);
    if (one && req.method === 'DELETE') return send(204);
    if (one && req.method === 'POST') {
      if (!json || json.legs !== 'aleg' || typeof json.aleg_url !== 'string') return send(400, { error: 'legs and aleg_url are required' });
      // Plivo runs the new XML on the call: fetched now, so the transfer is on record when it is acknowledged.
      return void fetchXml(json.aleg_url, { CallUUID: one[1]!, CallStatus: 'in-progress', Event: 'Transfer' }).then(
        (xml) => {
          request.transferXml = xml;
          send(202, { message: 'call transferred' });
        },
        (error: unknown) => send(400, { error: String(error) }),
      );
    }
    send(404, { error: 'not found' });
  });
  return {
    apiUrl: origin,
    authId,
    authToken,
    requests,
    answered: (holds) => arrivals.until(holds),
    failNext(status) {
      failure = status;
    },
    signed,
    fetchXml,
  };
}

const unescapeXml = (text: string) => text.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');

/** The stream a Plivo XML document opens: `<Stream>` bidirectional, mu-law 8 kHz, alone in the call; its URL and status callback. */
export function plivoStream(xml: string): { url: string; statusCallbackUrl: string | undefined } {
  const match = /<Stream ([^>]*)>([^<]+)<\/Stream>/.exec(xml);
  const attributes = match?.[1] ?? '';
  if (!match || !/bidirectional="true"/.test(attributes) || !/keepCallAlive="true"/.test(attributes) || !/contentType="audio\/x-mulaw;rate=8000"/.test(attributes)) {
    throw new Error(`no bidirectional mu-law stream in Plivo XML: ${xml}`);
  }
  const callback = /statusCallbackUrl="([^"]+)"/.exec(attributes)?.[1];
  return { url: unescapeXml(match[2]!.trim()), statusCallbackUrl: callback && unescapeXml(callback) };
}

/** The number a Plivo XML document dials, in E.164 (Plivo writes it without the `+`). */
export function plivoDial(xml: string | undefined): string | undefined {
  const number = xml && /<Dial[^>]*><Number[^>]*>([^<]+)<\/Number><\/Dial>/.exec(xml)?.[1];
  return number ? `+${number.replace(/^\+/, '')}` : undefined;
}

/**
 * A phone on Plivo's side of an Audio Stream (bidirectional, mu-law 8 kHz): it sends `start`,
 * `media` frames on the inbound track and `dtmf`; receives `playAudio`, `checkpoint` (answered
 * with `playedStream` once the audio before it has been received) and `clearAudio` (answered with
 * `clearedAudio`); and hangs up by closing the socket, as Plivo sends no `stop`. Messages it does
 * not expect (another content type, another stream's id) are kept in `unexpected`.
 */
export class PlivoPhone extends JsonStreamLine {
  readonly streamId = randomUUID();
  private sequence = 0;
  private chunk = 0;
  private readonly startedAt = Date.now();

  constructor(url: string, private readonly call: { callUuid: string }) {
    super(url);
  }

  protected receive(message: { event?: unknown; streamId?: unknown; name?: unknown; media?: { contentType?: unknown; sampleRate?: unknown; payload?: unknown } }): void {
    if (message.event === 'playAudio' && message.media?.contentType === 'audio/x-mulaw' && message.media.sampleRate === 8000 && typeof message.media.payload === 'string') {
      this.hear(message.media.payload);
    } else if (message.event === 'checkpoint' && message.streamId === this.streamId && typeof message.name === 'string') {
      if (this.echoMarks) this.send({ event: 'playedStream', sequenceNumber: this.next(), streamId: this.streamId, name: message.name });
      this.emit('mark', message.name);
    } else if (message.event === 'clearAudio' && message.streamId === this.streamId) {
      this.send({ event: 'clearedAudio', sequenceNumber: this.next(), streamId: this.streamId });
      this.emit('clear');
    } else this.unexpected.push(message);
  }

  /** Opens the socket (rejects on a refused upgrade) and sends `start` at once, as Plivo does. */
  async open(): Promise<void> {
    await opened(this.socket);
    this.send({
      event: 'start',
      sequenceNumber: this.next(),
      start: { callId: this.call.callUuid, streamId: this.streamId, accountId: 'MAZDQ1ZJIYMDZKMTSZMT', tracks: ['inbound'], mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000 } },
      extra_headers: '',
    });
  }

  private next(): number {
    return ++this.sequence;
  }

  private timestamp(): string {
    return String(this.startedAt + this.chunk * 20);
  }

  /** One 20 ms frame of the caller's voice (16 kHz PCM16); silence when omitted. */
  speak(frame: Int16Array = new Int16Array(FRAME_SAMPLES)): void {
    const payload = this.encode(frame);
    this.send({ event: 'media', sequenceNumber: this.next(), streamId: this.streamId, media: { track: 'inbound', timestamp: this.timestamp(), chunk: ++this.chunk, payload }, extra_headers: '' });
  }

  dtmf(digit: string): void {
    this.send({ event: 'dtmf', sequenceNumber: this.next(), streamId: this.streamId, dtmf: { track: 'inbound', digit, timestamp: this.timestamp() }, extra_headers: '' });
  }

  /** The caller hangs up: Plivo ends the stream by closing the socket. */
  hangUp(): void {
    this.socket.close(1000);
  }
}
