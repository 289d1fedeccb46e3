import { telnyxFormat } from '../../voice/serializers/telnyx.js';
import { CarrierError, type Carrier, type InboundAnswer, type Markup } from './types.js';
import { carrierRequest } from './rest.js';
import { HANG_UP_TWIML, sayAndHangUpTwiml, xml } from './twilio.js';

/**
 * Telnyx through TeXML, its TwiML-compatible markup: one TeXML application answers inbound calls
 * (its voice URL is `/api/telephony/telnyx/inbound`) and places outbound ones, so a number needs
 * no second application. Outbound calls are created with the TeXML (not Call Control) REST API,
 * their TeXML inline, because then inbound and outbound calls speak the same markup, the same
 * form-encoded status callbacks and the same `AnsweredBy` verdicts, and Telnyx connects the media
 * stream itself once the callee answers (Call Control would need a second application, JSON
 * webhooks and a `streaming_start` command per call). Transfers and hang-ups update the call
 * (`Texml` with `<Dial><Number>`, `Status=completed`).
 */

/** `<Connect><Stream>`: bidirectional RTP (mu-law), the call's id and one-time token in the URL's query. */
export function streamTexml(streamUrl: string, callId: number, token: string): string {
  const url = `${streamUrl}?${new URLSearchParams({ call_id: String(callId), token })}`;
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="${xml(url)}" bidirectionalMode="rtp" bidirectionalCodec="PCMU"/></Connect></Response>`;
}

/** A transfer: `<Dial>` with the number as a `<Number>` noun, the form TeXML's documentation gives. */
export function dialTexml(number: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Dial><Number>${xml(number)}</Number></Dial></Response>`;
}

/** An inbound call's answer as TeXML (its `<Say>`, `<Hangup>` and `<Dial>` are TwiML's). */
export function texmlAnswer(answer: InboundAnswer): Markup {
  const body =
    answer.kind === 'stream' ? streamTexml(answer.streamUrl, answer.callId, answer.token)
    : answer.kind === 'refuse' ? sayAndHangUpTwiml(answer.text)
    : HANG_UP_TWIML;
  return { contentType: 'text/xml; charset=utf-8', body };
}

export interface TelnyxSettings {
  /** An API key (v2) of the account, sent as a bearer token. */
  readonly apiKey: string;
  /** The account's id as TeXML names it (`AccountSid` in its webhooks), for updating calls. */
  readonly accountSid: string;
  /** The id of the TeXML application (its connection) that places outbound calls. */
  readonly connectionId: string;
  /** @defaultValue https://api.telnyx.com */
  readonly apiUrl: string;
}

/** Telnyx's error body: `{errors: [{code, title, detail}]}`. */
function errorText(body: Record<string, unknown>): unknown {
  const first = Array.isArray(body.errors) ? (body.errors[0] as { title?: unknown; detail?: unknown } | undefined) : undefined;
  return typeof first?.detail === 'string' ? first.detail : first?.title;
}

export function createTelnyxCarrier(settings: TelnyxSettings): Carrier {
  const base = `${settings.apiUrl.replace(/\/+$/, '')}/v2/texml`;
  const authorization = `Bearer ${settings.apiKey}`;
  async function post(path: string, body: { json: Record<string, unknown> } | { form: Record<string, string> }): Promise<Record<string, unknown>> {
    const [contentType, payload] = 'json' in body ? ['application/json', JSON.stringify(body.json)] : ['application/x-www-form-urlencoded', new URLSearchParams(body.form).toString()];
    return carrierRequest(`${base}${path}`, { method: 'POST', headers: { authorization, 'content-type': contentType }, body: payload }, errorText);
  }
  const callPath = (callSid: string) => `/Accounts/${encodeURIComponent(settings.accountSid)}/Calls/${encodeURIComponent(callSid)}`;
  return {
    name: 'telnyx',
    format: telnyxFormat,
    async place(request) {
      const created = await post(`/calls/${encodeURIComponent(settings.connectionId)}`, {
        json: {
          To: request.to,
          From: request.from,
          Texml: streamTexml(request.streamUrl, request.callId, request.token),
          StatusCallback: request.statusUrl,
          StatusCallbackMethod: 'POST',
          StatusCallbackEvent: 'initiated ringing answered completed',
          MachineDetection: 'Enable',
          AsyncAmd: true,
          AsyncAmdStatusCallback: request.statusUrl,
          AsyncAmdStatusCallbackMethod: 'POST',
        },
      });
      if (typeof created.call_sid !== 'string' || !created.call_sid) throw new CarrierError('The carrier did not return a call id');
      return { carrierCallId: created.call_sid };
    },
    async transfer(carrierCallId, number) {
      await post(callPath(carrierCallId), { form: { Texml: dialTexml(number) } });
    },
    async hangUp(carrierCallId) {
      // TeXML ends a call in any state with `completed` (ringing ones included).
      await post(callPath(carrierCallId), { form: { Status: 'completed' } });
    },
  };
}
