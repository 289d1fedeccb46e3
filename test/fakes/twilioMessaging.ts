import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { twilioSignature } from '../../runtime/calls/carriers/twilioSignature.js';
import { Conditions } from '../helpers/conditions.js';

/**
 * A local stand-in for Twilio's Programmable Messaging REST API (2010-04-01), create a message
 * only: `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, form-encoded, HTTP basic auth,
 * answered with the Message resource (201) or Twilio's error body `{code, message, more_info,
 * status}`. Recipients who replied STOP are refused as Twilio refuses them (21610), and bodies over
 * 1,600 characters as Twilio does (21617). Beside it, the webhook bodies Twilio posts (an incoming
 * message, a status callback) and their signature.
 */

export interface SentSms {
  readonly from: string;
  readonly to: string;
  readonly body: string;
  readonly statusCallback: string | undefined;
  /** The sid the fake answered with. */
  readonly sid: string;
}

export interface TwilioMessagingFake {
  /** The origin to configure as `TWILIO_API_URL`. */
  readonly apiUrl: string;
  readonly accountSid: string;
  readonly authToken: string;
  /** The messages accepted, in order. */
  readonly sent: SentSms[];
  /** Every request answered, accepted or not (its form as sent). */
  readonly requests: Array<{ readonly path: string; readonly authorization: string | undefined; readonly form: URLSearchParams; readonly status: number }>;
  /** Refuses messages to `number` from now on, as after the customer replied STOP (21610, HTTP 400). */
  optOut(number: string): void;
  /** Accepts messages to `number` again, as after START. */
  optIn(number: string): void;
  /**
   * Refuses the next `count` creates with `status` (429: Twilio's 20429; 5xx: 20500; any other: the
   * given `code`/`message`, by default 21211 "Invalid 'To' Phone Number").
   */
  failNext(count: number, status: number, error?: { code: number; message: string }): void;
  /** Resolves once `count` messages have been accepted (counting from the fake's start). */
  waitForSent(count: number): Promise<void>;
  /** Resolves once `count` requests have been answered, refusals included. */
  waitForRequests(count: number): Promise<void>;
  close(): Promise<void>;
}

/** Twilio's message body limit, counted in characters (code points). */
const BODY_LIMIT = 1600;

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
/** A message sid as Twilio writes them: `SM` (or `MM` with media) and 32 hex digits. */
export const messageSid = (prefix: 'SM' | 'MM' = 'SM') => `${prefix}${hex(16)}`;

const twilioError = (code: number, message: string, status: number) => ({ code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status });

/** The first failure status's error body, as Twilio words its common ones. */
function failureBody(status: number, error: { code: number; message: string } | undefined) {
  if (error) return twilioError(error.code, error.message, status);
  if (status === 429) return twilioError(20429, 'Too Many Requests', status);
  if (status >= 500) return twilioError(20500, 'Internal Server Error', status);
  return twilioError(21211, "Invalid 'To' Phone Number", status);
}

export async function startTwilioMessagingFake(options: { accountSid?: string; authToken?: string } = {}): Promise<TwilioMessagingFake> {
  const accountSid = options.accountSid ?? `AC${hex(16)}`;
  const authToken = options.authToken ?? hex(16);
  const expectedAuthorization = `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}`;
  const path = `/2010-04-01/Accounts/${accountSid}/Messages.json`;
  const sent: SentSms[] = [];
  const requests: TwilioMessagingFake['requests'][number][] = [];
  const optedOut = new Set<string>();
  const failures: Array<{ status: number; error: { code: number; message: string } | undefined }> = [];
  const changes = new Conditions();

  function answer(req: IncomingMessage, res: ServerResponse, raw: string) {
    const form = new URLSearchParams(raw);
    const reply = (status: number, body: unknown) => {
      requests.push({ path: req.url ?? '', authorization: req.headers.authorization, form, status });
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(body));
      changes.changed();
    };
    if (req.headers.authorization !== expectedAuthorization) return reply(401, twilioError(20003, 'Authenticate', 401));
    if (req.method !== 'POST' || req.url !== path) return reply(404, twilioError(20404, `The requested resource ${req.url} was not found`, 404));
    const to = form.get('To');
    const from = form.get('From');
    const body = form.get('Body');
    if (!to) return reply(400, twilioError(21604, "A 'To' phone number is required.", 400));
    if (!from) return reply(400, twilioError(21603, "A 'From' phone number is required.", 400));
    if (!body) return reply(400, twilioError(21602, 'Message body is required.', 400));
    if ([...body].length > BODY_LIMIT) return reply(400, twilioError(21617, 'The concatenated message body exceeds the 1600 character limit.', 400));
    const failure = failures.shift();
    if (failure) return reply(failure.status, failureBody(failure.status, failure.error));
    if (optedOut.has(to)) return reply(400, twilioError(21610, 'Attempt to send to unsubscribed recipient', 400));
    const sid = messageSid();
    const now = new Date().toUTCString().replace('GMT', '+0000');
    sent.push({ from, to, body, statusCallback: form.get('StatusCallback') ?? undefined, sid });
    reply(201, {
      account_sid: accountSid,
      api_version: '2010-04-01',
      body,
      date_created: now,
      date_sent: null,
      date_updated: now,
      direction: 'outbound-api',
      error_code: null,
      error_message: null,
      from,
      messaging_service_sid: null,
      num_media: '0',
      num_segments: String(segmentsOf(body)),
      price: null,
      price_unit: 'USD',
      sid,
      status: 'queued',
      subresource_uris: { media: `/2010-04-01/Accounts/${accountSid}/Messages/${sid}/Media.json` },
      to,
      uri: `/2010-04-01/Accounts/${accountSid}/Messages/${sid}.json`,
    });
  }

  const server = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (raw += chunk));
    req.on('end', () => answer(req, res, raw));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  let closed: Promise<void> | undefined;
  return {
    apiUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    accountSid,
    authToken,
    sent,
    requests,
    optOut: (number) => void optedOut.add(number),
    optIn: (number) => void optedOut.delete(number),
    failNext(count, status, error) {
      for (let i = 0; i < count; i++) failures.push({ status, error });
    },
    waitForSent: (count) => changes.until(() => sent.length >= count),
    waitForRequests: (count) => changes.until(() => requests.length >= count),
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}

/** GSM 03.38's basic character set and its extension table: a message of only these goes as GSM-7. */
const GSM7 = /^[@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&'()*+,\-./0-9:;<=>?¡A-ZÄÖÑÜ§¿a-zäöñüà^{}\\[~\]|€]*$/;

/** The SMS parts a body travels in: GSM-7 160 alone or 153 per part, else UCS-2 70 alone or 67 per part. */
export function segmentsOf(body: string): number {
  const gsm = GSM7.test(body);
  const length = gsm ? body.length + (body.match(/[\^{}\\[~\]|€]/g)?.length ?? 0) : body.length;
  const [single, part] = gsm ? [160, 153] : [70, 67];
  return length <= single ? 1 : Math.ceil(length / part);
}

/** The country, and a place in it, Twilio's geographic lookup gives a number (empty where it finds none). */
function placeOf(number: string): { country: string; state: string; city: string; zip: string } {
  if (number.startsWith('+1')) return { country: 'US', state: 'CA', city: 'SAN FRANCISCO', zip: '94105' };
  if (number.startsWith('+44')) return { country: 'GB', state: '', city: '', zip: '' };
  if (number.startsWith('+49')) return { country: 'DE', state: '', city: '', zip: '' };
  return { country: '', state: '', city: '', zip: '' };
}

/**
 * The form Twilio posts to a number's incoming-message webhook, with the fields it sends in the
 * order it sends them: SMS without media (`SM…` sid), MMS with (`MM…`). `messagingServiceSid` and
 * `optOutType` appear only for a number in a Messaging Service (the latter with Advanced Opt-Out).
 */
export function inboundSmsForm(message: {
  from: string;
  to: string;
  body: string;
  accountSid: string;
  sid?: string;
  media?: ReadonlyArray<{ url?: string; contentType: string }>;
  messagingServiceSid?: string;
  optOutType?: 'STOP' | 'START' | 'HELP';
}): URLSearchParams {
  const media = message.media ?? [];
  const sid = message.sid ?? messageSid(media.length ? 'MM' : 'SM');
  const to = placeOf(message.to);
  const from = placeOf(message.from);
  const form = new URLSearchParams();
  form.set('ToCountry', to.country);
  form.set('ToState', to.state);
  form.set('SmsMessageSid', sid);
  form.set('NumMedia', String(media.length));
  form.set('ToCity', to.city);
  form.set('FromZip', from.zip);
  form.set('SmsSid', sid);
  form.set('FromState', from.state);
  form.set('SmsStatus', 'received');
  form.set('FromCity', from.city);
  form.set('Body', message.body);
  form.set('FromCountry', from.country);
  form.set('To', message.to);
  if (message.messagingServiceSid) form.set('MessagingServiceSid', message.messagingServiceSid);
  form.set('ToZip', to.zip);
  if (message.optOutType) form.set('OptOutType', message.optOutType);
  form.set('NumSegments', String(segmentsOf(message.body)));
  media.forEach((item, index) => {
    form.set(`MediaContentType${index}`, item.contentType);
    form.set(`MediaUrl${index}`, item.url ?? `https://api.twilio.com/2010-04-01/Accounts/${message.accountSid}/Messages/${sid}/Media/ME${hex(16)}`);
  });
  form.set('MessageSid', sid);
  form.set('AccountSid', message.accountSid);
  form.set('From', message.from);
  form.set('ApiVersion', '2010-04-01');
  return form;
}

/** A test account sid for callbacks that do not name one. */
export const TEST_ACCOUNT_SID = `AC${'0'.repeat(32)}`;

/**
 * The form Twilio posts to a message's `StatusCallback`: `MessageStatus` (and the older `SmsStatus`)
 * with the message's sid, numbers and account; `ErrorCode` on failed and undelivered messages;
 * `RawDlrDoneDate` (YYMMDDhhmm, the carrier's delivery receipt) on delivered ones.
 */
export function statusCallbackForm(callback: { sid: string; status: string; to: string; from: string; errorCode?: string | number; accountSid?: string; messagingServiceSid?: string }): URLSearchParams {
  const form = new URLSearchParams();
  if (callback.errorCode !== undefined) form.set('ErrorCode', String(callback.errorCode));
  form.set('SmsSid', callback.sid);
  form.set('SmsStatus', callback.status);
  form.set('MessageStatus', callback.status);
  form.set('To', callback.to);
  if (callback.messagingServiceSid) form.set('MessagingServiceSid', callback.messagingServiceSid);
  form.set('MessageSid', callback.sid);
  form.set('AccountSid', callback.accountSid ?? TEST_ACCOUNT_SID);
  form.set('From', callback.from);
  form.set('ApiVersion', '2010-04-01');
  if (callback.status === 'delivered') form.set('RawDlrDoneDate', new Date().toISOString().replace(/\D/g, '').slice(2, 12));
  return form;
}

/** `X-Twilio-Signature` for a webhook Twilio posts `params` to `url` (the full URL, query included). */
export const signTwilio = (authToken: string, url: string, params: URLSearchParams): string => twilioSignature(authToken, url, params);
