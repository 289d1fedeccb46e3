import { twilioFormat } from '../../voice/serializers/twilio.js';
import { CarrierError, type Carrier, type InboundAnswer, type Markup } from './types.js';
import { carrierRequest } from './rest.js';

/**
 * Twilio: the Programmable Voice REST API (create call with TwiML and status callbacks, redirect to
 * `<Dial>` for transfers), and the TwiML that answers its webhooks and connects a call's audio to
 * the media-stream socket `/ws/telephony/twilio`.
 */
export const xml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** `<Connect><Stream>` with the call's id and one-time token as stream parameters. */
export function streamTwiml(streamUrl: string, parameters: Readonly<Record<string, string>>): string {
  const params = Object.entries(parameters).map(([name, value]) => `<Parameter name="${xml(name)}" value="${xml(value)}"/>`).join('');
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="${xml(streamUrl)}">${params}</Stream></Connect></Response>`;
}

export function sayAndHangUpTwiml(text: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?><Response><Say>${xml(text)}</Say><Hangup/></Response>`;
}

export const HANG_UP_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>';

/** An inbound call's answer as TwiML. */
export function twimlAnswer(answer: InboundAnswer): Markup {
  const body =
    answer.kind === 'stream' ? streamTwiml(answer.streamUrl, { call_id: String(answer.callId), token: answer.token })
    : answer.kind === 'refuse' ? sayAndHangUpTwiml(answer.text)
    : HANG_UP_TWIML;
  return { contentType: 'text/xml; charset=utf-8', body };
}

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
    const headers = { authorization, 'content-type': 'application/x-www-form-urlencoded' };
    return carrierRequest(`${base}${path}`, { method: 'POST', headers, body: body.toString() }, (json) => json.message);
  }
  return {
    name: 'twilio',
    format: twilioFormat,
    async place(request) {
      const created = await post('/Calls.json', {
        To: request.to,
        From: request.from,
        Twiml: streamTwiml(request.streamUrl, { call_id: String(request.callId), token: request.token }),
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
