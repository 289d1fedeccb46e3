import { createHmac, randomUUID, sign, type KeyObject } from 'node:crypto';
import { vonageFormat } from '../../voice/serializers/vonage.js';
import { CarrierError, type Carrier, type InboundAnswer, type Markup } from './types.js';
import { bareNumber, carrierRequest } from './rest.js';

/**
 * Vonage: the Voice API (`POST /v1/calls` with an inline NCCO, `PUT /v1/calls/{uuid}` to transfer
 * or hang up), authenticated with a JWT the application signs with its private key (RS256), and
 * the NCCOs answering its answer webhook. A call's audio goes through the NCCO `connect` action to
 * the `/ws/telephony/vonage` socket (see `serializers/vonage.ts`).
 *
 * Vonage writes numbers in E.164 without the `+` (`14155550100`); the platform with it.
 */

/** The audio the `websocket` endpoint asks for: the engine's own 16 kHz linear PCM. */
export const VONAGE_AUDIO = 'audio/l16;rate=16000';


type Ncco = Array<Record<string, unknown>>;

/** `connect` to the media stream; the stream claims the call with the id and one-time token in its headers. */
export function streamNcco(streamUrl: string, callId: number, token: string): Ncco {
  return [{ action: 'connect', endpoint: [{ type: 'websocket', uri: streamUrl, 'content-type': VONAGE_AUDIO, headers: { call_id: String(callId), token } }] }];
}

/**
 * An inbound call's answer as an NCCO. A call ends when its NCCO has nothing left to do, so a
 * refusal is a `talk` alone and a hang-up an empty NCCO.
 */
export function nccoAnswer(answer: InboundAnswer): Markup {
  const ncco =
    answer.kind === 'stream' ? streamNcco(answer.streamUrl, answer.callId, answer.token)
    : answer.kind === 'refuse' ? [{ action: 'talk', text: answer.text }]
    : [];
  return { contentType: 'application/json', body: JSON.stringify(ncco) };
}

/**
 * The NCCO a transferred call runs: `connect` to the number. Its caller ID is one of the
 * application's numbers (`randomFromNumber`; the adapter does not know which number the call is on,
 * and without a `from` the callee would see an unknown caller).
 */
export function transferNcco(number: string): Ncco {
  return [{ action: 'connect', randomFromNumber: true, endpoint: [{ type: 'phone', number: bareNumber(number) }] }];
}

/** A compact JWT: `header.claims.signature`, base64url each. HS256 signs with a shared secret, RS256 with a private key. */
export function encodeJwt(claims: Readonly<Record<string, unknown>>, key: { alg: 'HS256'; secret: string } | { alg: 'RS256'; privateKey: KeyObject }): string {
  const signing = `${Buffer.from(JSON.stringify({ alg: key.alg, typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  const signature = key.alg === 'HS256' ? createHmac('sha256', key.secret).update(signing).digest() : sign('sha256', Buffer.from(signing), key.privateKey);
  return `${signing}.${signature.toString('base64url')}`;
}

/** How long each request's application JWT is valid (Vonage allows up to 24 h). */
const APPLICATION_JWT_SECONDS = 15 * 60;

export interface VonageSettings {
  /** The Vonage application whose answer URL is `/api/telephony/vonage/inbound`. */
  readonly applicationId: string;
  /** The application's private key (RSA), from which each request's JWT is signed. */
  readonly privateKey: KeyObject;
  /** @defaultValue https://api.nexmo.com */
  readonly apiUrl: string;
}

/** Vonage's error body (RFC 7807): `{type, title, detail, invalid_parameters}`. */

export function createVonageCarrier(settings: VonageSettings): Carrier {
  const base = `${settings.apiUrl.replace(/\/+$/, '')}/v1/calls`;
  function applicationJwt(): string {
    const iat = Math.floor(Date.now() / 1000);
    return encodeJwt({ application_id: settings.applicationId, iat, exp: iat + APPLICATION_JWT_SECONDS, jti: randomUUID() }, { alg: 'RS256', privateKey: settings.privateKey });
  }
  async function send(method: 'POST' | 'PUT', path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
    // A transfer or hang-up is answered 204 without a body.
    return carrierRequest(`${base}${path}`, { method, headers: { authorization: `Bearer ${applicationJwt()}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }, (json) => json.detail ?? json.title);
  }
  const callPath = (uuid: string) => `/${encodeURIComponent(uuid)}`;
  return {
    name: 'vonage',
    format: vonageFormat,
    async place(request) {
      const created = await send('POST', '', {
        to: [{ type: 'phone', number: bareNumber(request.to) }],
        from: { type: 'phone', number: bareNumber(request.from) },
        ncco: streamNcco(request.streamUrl, request.callId, request.token),
        event_url: [request.statusUrl],
        event_method: 'POST',
        // Asynchronous: the NCCO (the stream) runs at once, the verdict follows as a `human` or `machine` event.
        advanced_machine_detection: { behavior: 'continue', mode: 'default' },
      });
      if (typeof created.uuid !== 'string' || !created.uuid) throw new CarrierError('The carrier did not return a call id');
      return { carrierCallId: created.uuid };
    },
    async transfer(carrierCallId, number) {
      await send('PUT', callPath(carrierCallId), { action: 'transfer', destination: { type: 'ncco', ncco: transferNcco(number) } });
    },
    async hangUp(carrierCallId) {
      // Ends a call in any state, ringing ones included.
      await send('PUT', callPath(carrierCallId), { action: 'hangup' });
    },
  };
}
