import { plivoFormat } from '../../voice/serializers/plivo.js';
import { CarrierError, type Carrier, type InboundAnswer, type Markup } from './types.js';
import { bareNumber, carrierRequest } from './rest.js';
import { xml } from './twilio.js';

/**
 * Plivo: the Call API (v1) for outbound calls, transfers and hang-ups, and the Plivo XML that
 * answers its webhooks and connects a call's audio to the media-stream socket
 * `/ws/telephony/plivo`. Plivo takes no XML inline: a call placed, and a call transferred, fetch
 * theirs from a URL, so the platform serves both (`/api/telephony/plivo/answer` with the call's
 * id and one-time token, `/api/telephony/plivo/dial` with the number), signed like every webhook.
 * The `request_uuid` a placement returns is the call's `CallUUID` in its callbacks, the id its
 * transfer and hang-up take.
 */

const XML_TYPE = 'text/xml; charset=utf-8';
const PROLOG = '<?xml version="1.0" encoding="UTF-8"?>';

/** Paths of the platform's Plivo webhooks (the route file serves them). */
export const PLIVO_PATHS = {
  inbound: '/api/telephony/plivo/inbound',
  status: '/api/telephony/plivo/status',
  answer: '/api/telephony/plivo/answer',
  dial: '/api/telephony/plivo/dial',
} as const;

/**
 * `<Stream>` alone in the document (`keepCallAlive`: nothing after it runs while it lasts, and the
 * call ends with it), bidirectional, 8 kHz mu-law, the call's id and token in the URL's query;
 * the stream's own status events go to `statusUrl`.
 */
export function streamXml(streamUrl: string, callId: number, token: string, statusUrl: string): string {
  const url = `${streamUrl}?${new URLSearchParams({ call_id: String(callId), token })}`;
  return `${PROLOG}<Response><Stream bidirectional="true" keepCallAlive="true" contentType="audio/x-mulaw;rate=8000" statusCallbackUrl="${xml(statusUrl)}" statusCallbackMethod="POST">${xml(url)}</Stream></Response>`;
}

export function speakAndHangUpXml(text: string): string {
  return `${PROLOG}<Response><Speak>${xml(text)}</Speak><Hangup/></Response>`;
}

export const HANG_UP_XML = `${PROLOG}<Response><Hangup/></Response>`;

/** The answer to a callback that asks nothing more of the call. */
export const EMPTY_PLIVO_XML: Markup = { contentType: XML_TYPE, body: `${PROLOG}<Response/>` };


export function dialXml(number: string): string {
  return `${PROLOG}<Response><Dial><Number>${xml(bareNumber(number))}</Number></Dial></Response>`;
}

/** A call's answer as Plivo XML; `statusUrl` takes the stream's status events. */
export function plivoAnswer(answer: InboundAnswer, statusUrl: string): Markup {
  const body =
    answer.kind === 'stream' ? streamXml(answer.streamUrl, answer.callId, answer.token, statusUrl)
    : answer.kind === 'refuse' ? speakAndHangUpXml(answer.text)
    : HANG_UP_XML;
  return { contentType: XML_TYPE, body };
}

export interface PlivoSettings {
  readonly authId: string;
  readonly authToken: string;
  /** @defaultValue https://api.plivo.com */
  readonly apiUrl: string;
  /** The platform's public origin, where Plivo fetches a placed or transferred call's XML. */
  readonly publicUrl: () => string;
}

export function createPlivoCarrier(settings: PlivoSettings): Carrier {
  const base = `${settings.apiUrl.replace(/\/+$/, '')}/v1/Account/${encodeURIComponent(settings.authId)}/Call/`;
  const authorization = `Basic ${Buffer.from(`${settings.authId}:${settings.authToken}`).toString('base64')}`;
  async function request(method: 'POST' | 'DELETE', path: string, body?: Record<string, string>): Promise<Record<string, unknown>> {
    const headers = { authorization, ...(body && { 'content-type': 'application/json' }) };
    return carrierRequest(`${base}${path}`, { method, headers, body: body && JSON.stringify(body) }, (json) => json.error);
  }
  /** A live call's path; an empty id would name every call of the account (a DELETE ends them all). */
  function callPath(carrierCallId: string): string {
    if (!carrierCallId) throw new CarrierError('No call id to act on');
    return `${encodeURIComponent(carrierCallId)}/`;
  }
  return {
    name: 'plivo',
    format: plivoFormat,
    async place(call) {
      const created = await request('POST', '', {
        from: bareNumber(call.from),
        to: bareNumber(call.to),
        answer_url: `${settings.publicUrl()}${PLIVO_PATHS.answer}?${new URLSearchParams({ call_id: String(call.callId), token: call.token })}`,
        answer_method: 'POST',
        ring_url: call.statusUrl,
        ring_method: 'POST',
        hangup_url: call.statusUrl,
        hangup_method: 'POST',
        machine_detection: 'true',
        machine_detection_url: call.statusUrl,
        machine_detection_method: 'POST',
      });
      // One destination: one id (a list of them for several).
      const id = Array.isArray(created.request_uuid) ? created.request_uuid[0] : created.request_uuid;
      if (typeof id !== 'string' || !id) throw new CarrierError('The carrier did not return a call id');
      return { carrierCallId: id };
    },
    async transfer(carrierCallId, number) {
      await request('POST', callPath(carrierCallId), { legs: 'aleg', aleg_url: `${settings.publicUrl()}${PLIVO_PATHS.dial}?${new URLSearchParams({ number })}`, aleg_method: 'POST' });
    },
    async hangUp(carrierCallId) {
      // One request ends a call in any state, ringing or queued ones included.
      await request('DELETE', callPath(carrierCallId));
    },
  };
}
