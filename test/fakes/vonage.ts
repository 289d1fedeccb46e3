import { createHash, createHmac, generateKeyPairSync, verify, type KeyObject } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { Test } from 'tap';
import { serveFake } from './http.js';
import WebSocket from 'ws';
import { pingPong, type PhoneEvents } from '../../runtime/calls/carriers/loopback.js';
import { FRAME_SAMPLES } from '../../runtime/voice/audio.js';
import type { PhoneLine } from '../helpers/phone.js';
import { Conditions } from '../helpers/conditions.js';

/**
 * A local stand-in for Vonage, speaking its wire protocols:
 * - the Voice API as the carrier adapter uses it: create a call (`POST /v1/calls`, JSON, answered
 *   201 `{uuid, status, direction, conversation_uuid}`) and modify one (`PUT /v1/calls/{uuid}`
 *   with `{action: "transfer" | "hangup", ...}`, answered 204), each authenticated with an
 *   application JWT that the fake verifies (RS256 against the application's public key, its
 *   `application_id`, `iat`, `exp` and `jti`); errors as RFC 7807 `{type, title, detail}`;
 * - its signed webhooks: `Authorization: Bearer <JWT>` signed HS256 with the signature secret,
 *   with `payload_hash` the SHA-256 of the payload;
 * - a phone on Vonage's side of the WebSocket (`VonagePhone`).
 */

export interface VonageRequest {
  readonly method: string;
  readonly path: string;
  /** Whether the request's application JWT was valid. */
  readonly authorized: boolean;
  readonly json: Record<string, unknown> | undefined;
  /** The call a create made. */
  uuid?: string;
}

export interface FakeVonage {
  readonly apiUrl: string;
  readonly applicationId: string;
  /** The application's private key (VONAGE_PRIVATE_KEY), as PEM. */
  readonly privateKeyPem: string;
  readonly privateKey: KeyObject;
  /** The account's signature secret (VONAGE_SIGNATURE_SECRET). */
  readonly signatureSecret: string;
  readonly requests: VonageRequest[];
  /** Resolves once `holds()` is true, looked at as each request is answered (its record complete). */
  answered(holds: () => boolean): Promise<void>;
  /** Answer the next create with this status (e.g. 400 for an invalid number). */
  failNext(status: number): void;
  /** The `Authorization` header of a webhook whose payload is `payload`, signed at `atMs` (now by default). */
  signed(payload: string, atMs?: number): string;
}

let calls = 0;

/** A call uuid as Vonage writes them. */
export function vonageUuid(): string {
  const hex = (++calls).toString(16).padStart(12, '0');
  return `63f61863-4a51-4f6b-86e1-${hex}`;
}

/** An HS256 JWT over `claims`, as Vonage signs webhooks. */
export function hs256(claims: Record<string, unknown>, secret: string): string {
  const signing = [{ alg: 'HS256', typ: 'JWT' }, claims].map((part) => Buffer.from(JSON.stringify(part)).toString('base64url')).join('.');
  return `${signing}.${createHmac('sha256', secret).update(signing).digest('base64url')}`;
}

/** Whether `authorization` carries an application JWT Vonage would take: RS256 by `publicKey`, for `applicationId`, current, with a `jti`. */
function applicationJwtValid(authorization: string | undefined, publicKey: KeyObject, applicationId: string): boolean {
  const [header, claims, signature] = /^Bearer (.+)$/.exec(authorization ?? '')?.[1]?.split('.') ?? [];
  if (!header || !claims || !signature) return false;
  if (!verify('sha256', Buffer.from(`${header}.${claims}`), publicKey, Buffer.from(signature, 'base64url'))) return false;
  const alg = (JSON.parse(Buffer.from(header, 'base64url').toString()) as { alg?: string }).alg;
  const body = JSON.parse(Buffer.from(claims, 'base64url').toString()) as { application_id?: string; iat?: number; exp?: number; jti?: string };
  const now = Date.now() / 1000;
  return alg === 'RS256' && body.application_id === applicationId && typeof body.jti === 'string' && typeof body.iat === 'number' && body.iat <= now + 60 && (body.exp === undefined || body.exp > now);
}

export async function startFakeVonage(t: Test): Promise<FakeVonage> {
  const applicationId = 'aaaaaaaa-bbbb-4ccc-8ddd-0123456789ab';
  const signatureSecret = 'vonage-signature-secret-0123456789';
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const requests: VonageRequest[] = [];
  const arrivals = new Conditions();
  let failure: number | undefined;
  const origin = await serveFake(t, (req, res, raw) => {
    const path = req.url ?? '';
    const json = req.headers['content-type']?.startsWith('application/json') && raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
    const authorized = applicationJwtValid(req.headers.authorization, publicKey, applicationId);
    const request: VonageRequest = { method: req.method ?? '', path, authorized, json };
    requests.push(request);
    const send = (status: number, body?: unknown) => {
      arrivals.changed();
      res.writeHead(status, body === undefined ? {} : { 'content-type': 'application/json' });
      res.end(body === undefined ? undefined : JSON.stringify(body));
    };
    const problem = (status: number, title: string, detail: string) => send(status, { type: `https://developer.nexmo.com/api-errors#${status}`, title, detail, instance: 'fake' });
    if (!authorized) return problem(401, 'Unauthorized', 'You did not provide correct credentials.');
    if (req.method === 'POST' && path === '/v1/calls') {
      const to = (json?.to as Array<{ number?: unknown }> | undefined)?.[0]?.number;
      if (typeof to !== 'string' || !Array.isArray(json?.ncco)) return problem(400, 'Bad Request', 'to and ncco are required.');
      if (failure !== undefined) {
        const status = failure;
        failure = undefined;
        return problem(status, 'Bad Request', 'The request failed due to validation errors');
      }
      request.uuid = vonageUuid();
      return send(201, { uuid: request.uuid, status: 'started', direction: 'outbound', conversation_uuid: `CON-${request.uuid}` });
    }
    const update = /^\/v1\/calls\/([\w-]+)$/.exec(path);
    if (req.method === 'PUT' && update && (json?.action === 'hangup' || json?.action === 'transfer')) return send(204);
    problem(404, 'Not Found', 'The requested resource does not exist.');
  });
  return {
    apiUrl: origin,
    applicationId,
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    privateKey,
    signatureSecret,
    requests,
    answered: (holds) => arrivals.until(holds),
    failNext(status) {
      failure = status;
    },
    signed(payload, atMs = Date.now()) {
      const iat = Math.floor(atMs / 1000);
      const claims = { iat, jti: `${iat}-${++calls}`, iss: 'Vonage', payload_hash: createHash('sha256').update(payload).digest('hex'), api_key: 'abcd1234', application_id: applicationId };
      return `Bearer ${hs256(claims, signatureSecret)}`;
    },
  };
}

/**
 * Vonage's side of a call's WebSocket: it sends `websocket:connected` with the endpoint's headers,
 * then the caller's audio as binary 640-byte messages (16 kHz PCM16), `websocket:dtmf`; it plays
 * the binary messages it receives, echoes each `notify` as `websocket:notify` (with its payload)
 * and answers `clear` with `websocket:cleared`. The call's end closes the socket normally.
 */
export class VonagePhone extends EventEmitter<PhoneEvents> implements PhoneLine {
  readonly socket: WebSocket;
  closed = false;
  /** Echo `notify` (as Vonage does once the audio before it has played). */
  echoMarks = true;
  /** The text messages received, parsed. */
  readonly controls: Array<Record<string, unknown>> = [];

  constructor(url: string, private readonly headers: Readonly<Record<string, string>>) {
    super();
    this.socket = new WebSocket(url);
    this.socket.on('message', (data, isBinary) => {
      if (isBinary) {
        const bytes = data as Buffer;
        this.emit('audio', new Int16Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength - (bytes.byteLength % 2))));
        return;
      }
      const message = JSON.parse(data.toString()) as { action?: string; payload?: { name?: string } };
      this.controls.push(message);
      if (message.action === 'notify') {
        if (this.echoMarks) this.send({ event: 'websocket:notify', payload: message.payload });
        if (typeof message.payload?.name === 'string') this.emit('mark', message.payload.name);
      } else if (message.action === 'clear') {
        this.send({ event: 'websocket:cleared' });
        this.emit('clear');
      }
    });
    this.socket.on('close', (code) => {
      this.closed = true;
      this.emit('close', code);
    });
    this.socket.on('error', () => {});
  }

  /** Opens the socket and sends `websocket:connected` with the headers. */
  async open(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.socket.once('open', () => resolve());
      this.socket.once('error', reject);
      this.socket.once('close', () => reject(new Error('closed before opening')));
    });
    this.send({ event: 'websocket:connected', 'content-type': 'audio/l16;rate=16000', ...this.headers });
  }

  send(message: unknown): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  /** One 20 ms frame of the caller's voice (16 kHz PCM16, 320 samples = 640 bytes); silence when omitted. */
  speak(frame: Int16Array = new Int16Array(FRAME_SAMPLES)): void {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength), { binary: true });
  }

  dtmf(digit: string): void {
    this.send({ event: 'websocket:dtmf', digit, duration: 260 });
  }

  /** The caller hangs up: Vonage ends the websocket leg with a normal close. */
  hangUp(): void {
    this.socket.close(1000);
  }

  sync(): Promise<void> {
    return pingPong(this.socket);
  }
}
