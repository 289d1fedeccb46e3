import { randomBytes } from 'node:crypto';
import type { Logger } from '../logger.js';

/**
 * Carriers place outbound calls and act on live ones. A call's audio always comes back over the
 * Twilio media-stream protocol to `/ws/telephony/twilio`, so placing a call means: ask the carrier
 * to dial, and give it the TwiML that connects the answered call to the stream.
 * - `twilio`: the Programmable Voice REST API (create call with TwiML and status callbacks,
 *   redirect to `<Dial>` for transfers).
 * - `loopback`: no network; a local phone client (`dial` handler) answers over the same media
 *   stream. For development and benchmarks.
 */

export interface PlaceCallRequest {
  readonly callId: number;
  readonly to: string;
  readonly from: string;
  /** TwiML that connects the answered call to the media stream. */
  readonly twiml: string;
  readonly streamUrl: string;
  readonly token: string;
  /** Where the carrier posts status changes. */
  readonly statusUrl: string;
}

export interface Carrier {
  readonly name: string;
  /** @throws CarrierError when the carrier refuses the call. */
  place(request: PlaceCallRequest): Promise<{ carrierCallId: string }>;
  /** Redirects the live call to `number`. (Hanging up an answered call needs no carrier call: closing the media stream ends the TwiML, and the call.) */
  transfer(carrierCallId: string, number: string): Promise<void>;
  /**
   * Ends a call the platform gave up on before it was answered: an outbound one still ringing
   * (`ringing`: the callee's phone stops), or one whose media stream never connected.
   */
  hangUp(carrierCallId: string, state: 'ringing' | 'connected'): Promise<void>;
}

export class CarrierError extends Error {
  override readonly name = 'CarrierError';
}

const xml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** `<Connect><Stream>` with the call's id and one-time token as stream parameters. */
export function streamTwiml(streamUrl: string, parameters: Readonly<Record<string, string>>): string {
  const params = Object.entries(parameters).map(([name, value]) => `<Parameter name="${xml(name)}" value="${xml(value)}"/>`).join('');
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="${xml(streamUrl)}">${params}</Stream></Connect></Response>`;
}

export function sayAndHangUpTwiml(text: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Say>${xml(text)}</Say><Hangup/></Response>`;
}

export const HANG_UP_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>';

export function dialTwiml(number: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Dial>${xml(number)}</Dial></Response>`;
}

export interface TwilioSettings {
  readonly accountSid: string;
  readonly authToken: string;
  /** @defaultValue https://api.twilio.com */
  readonly apiUrl: string;
}

export function createTwilioCarrier(settings: TwilioSettings): Carrier {
  const base = `${settings.apiUrl.replace(/\/+$/, '')}/2010-04-01/Accounts/${encodeURIComponent(settings.accountSid)}`;
  const authorization = `Basic ${Buffer.from(`${settings.accountSid}:${settings.authToken}`).toString('base64')}`;
  async function post(path: string, form: Record<string, string | string[]>): Promise<Record<string, unknown>> {
    const body = new URLSearchParams();
    for (const [key, value] of Object.entries(form)) for (const item of Array.isArray(value) ? value : [value]) body.append(key, item);
    let response: Response;
    try {
      response = await fetch(`${base}${path}`, { method: 'POST', headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' }, body, signal: AbortSignal.timeout(10_000) });
    } catch (cause) {
      throw new CarrierError('The carrier could not be reached', { cause });
    }
    const json = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    if (!response.ok) throw new CarrierError(`The carrier refused the request (HTTP ${response.status}${typeof json.message === 'string' ? `: ${json.message}` : ''})`);
    return json;
  }
  return {
    name: 'twilio',
    async place(request) {
      const created = await post('/Calls.json', {
        To: request.to,
        From: request.from,
        Twiml: request.twiml,
        StatusCallback: request.statusUrl,
        StatusCallbackMethod: 'POST',
        StatusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'],
        MachineDetection: 'Enable',
        AsyncAmd: 'true',
        AsyncAmdStatusCallback: request.statusUrl,
      });
      if (typeof created.sid !== 'string') throw new CarrierError('The carrier did not return a call id');
      return { carrierCallId: created.sid };
    },
    async transfer(carrierCallId, number) {
      await post(`/Calls/${encodeURIComponent(carrierCallId)}.json`, { Twiml: dialTwiml(number) });
    },
    async hangUp(carrierCallId, state) {
      await post(`/Calls/${encodeURIComponent(carrierCallId)}.json`, { Status: state === 'ringing' ? 'canceled' : 'completed' });
    },
  };
}

/** What the loopback carrier hands to the local phone that answers. */
export interface LoopbackDial {
  readonly callId: number;
  readonly carrierCallId: string;
  readonly to: string;
  readonly from: string;
  readonly streamUrl: string;
  readonly token: string;
}

export interface LoopbackCarrier extends Carrier {
  readonly transfers: Array<{ carrierCallId: string; number: string }>;
  readonly hangUps: Array<{ carrierCallId: string; state: 'ringing' | 'connected' }>;
}

/**
 * @param dial answers the call: a phone client that connects to `streamUrl` and sends `start`
 *   with the token. The default (for `npm start` without a carrier) is a silent phone.
 */
export function createLoopbackCarrier(dial: (call: LoopbackDial) => void, logger?: Logger): LoopbackCarrier {
  const transfers: Array<{ carrierCallId: string; number: string }> = [];
  const hangUps: Array<{ carrierCallId: string; state: 'ringing' | 'connected' }> = [];
  return {
    name: 'loopback',
    transfers,
    hangUps,
    async place(request) {
      const carrierCallId = `LB${randomBytes(16).toString('hex')}`;
      queueMicrotask(() => {
        try {
          dial({ callId: request.callId, carrierCallId, to: request.to, from: request.from, streamUrl: request.streamUrl, token: request.token });
        } catch (error) {
          logger?.warn({ err: error, callId: request.callId }, 'loopback phone failed to answer');
        }
      });
      return { carrierCallId };
    },
    async transfer(carrierCallId, number) {
      transfers.push({ carrierCallId, number });
    },
    async hangUp(carrierCallId, state) {
      hangUps.push({ carrierCallId, state });
    },
  };
}
