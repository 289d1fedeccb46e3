import { ChannelError } from '../errors.js';

/**
 * Twilio Messaging (SMS) on the wire, with no state: its incoming-message webhook and status
 * callbacks (form bodies) read into plain values, the opt-out keywords Twilio acts on, replies cut
 * to the Messages API's body limit, and the one REST call that sends a message. The request
 * signature both webhooks carry is checked with `twilioSignatureMatches`
 * (runtime/calls/carriers/twilioSignature.ts), the same as the voice webhooks'.
 */

/** An incoming SMS/MMS as Twilio's webhook describes it. */
export interface InboundSms {
  /** `MessageSid` (`SM…`, or `MM…` with media): the same on Twilio's retries of one webhook. */
  sid: string;
  /** The customer's number (E.164). */
  from: string;
  /** The owner's Twilio number it was sent to (E.164). */
  to: string;
  /** As written, possibly empty (a picture alone). */
  body: string;
  /** `NumMedia`: attachments Twilio announced (at most 10). */
  mediaCount: number;
  media: Array<{ url: string; contentType: string }>;
  /** Twilio's own reading of a keyword; sent only by a Messaging Service with Advanced Opt-Out on. */
  optOutType?: 'STOP' | 'START' | 'HELP';
  accountSid?: string;
  messagingServiceSid?: string;
  /** `NumSegments`: the SMS parts the message arrived in. */
  segments?: number;
}

/** A status callback for a message the platform sent, reduced to the changes worth recording. */
export interface SmsStatus {
  sid: string;
  status: 'sent' | 'delivered' | 'read' | 'failed';
  /** On `failed`: Twilio's error code (e.g. `30003`), or the status that failed it when Twilio gave no code (`canceled`). */
  error?: string;
}

export type SmsKeyword = 'stop' | 'start' | 'help';

/** Twilio accepts up to 10 media per message. */
const MAX_MEDIA = 10;

/** A field's value; none when it is empty or holds U+0000 (no number or id of Twilio's does; PostgreSQL's text cannot). */
const nonEmpty = (value: string | null): string | undefined => (value && !value.includes('\u0000') ? value : undefined);

function count(value: string | null): number {
  const parsed = Number(value);
  return Number.isSafeInteger(parsed) && parsed > 0 ? parsed : 0;
}

const OPT_OUT_TYPES = new Set(['STOP', 'START', 'HELP'] as const);

/** @returns null when `MessageSid`, `From` or `To` is missing (not an incoming message). */
export function parseInboundSms(params: URLSearchParams): InboundSms | null {
  const sid = nonEmpty(params.get('MessageSid'));
  const from = nonEmpty(params.get('From'));
  const to = nonEmpty(params.get('To'));
  if (!sid || !from || !to) return null;
  const mediaCount = Math.min(count(params.get('NumMedia')), MAX_MEDIA);
  const media: InboundSms['media'] = [];
  for (let index = 0; index < mediaCount; index++) {
    const url = params.get(`MediaUrl${index}`);
    if (url) media.push({ url, contentType: params.get(`MediaContentType${index}`) ?? 'application/octet-stream' });
  }
  const sms: InboundSms = { sid, from, to, body: params.get('Body') ?? '', mediaCount, media };
  const optOutType = params.get('OptOutType')?.toUpperCase();
  if (optOutType && OPT_OUT_TYPES.has(optOutType as 'STOP')) sms.optOutType = optOutType as InboundSms['optOutType'];
  const accountSid = nonEmpty(params.get('AccountSid'));
  if (accountSid) sms.accountSid = accountSid;
  const messagingServiceSid = nonEmpty(params.get('MessagingServiceSid'));
  if (messagingServiceSid) sms.messagingServiceSid = messagingServiceSid;
  if (params.has('NumSegments')) sms.segments = count(params.get('NumSegments'));
  return sms;
}

/** Twilio's `MessageStatus` values and what the platform records for each (null: not recorded). */
const STATUS_OF: Readonly<Record<string, SmsStatus['status'] | null>> = {
  queued: null,
  accepted: null,
  scheduled: null,
  sending: null,
  sent: 'sent',
  delivered: 'delivered',
  read: 'read',
  undelivered: 'failed',
  failed: 'failed',
  canceled: 'failed',
};

/**
 * @returns null for a callback without a message id, for the statuses before a message leaves
 * Twilio (queued, accepted, scheduled, sending), and for any status Twilio adds later.
 */
export function parseStatusCallback(params: URLSearchParams): SmsStatus | null {
  const sid = nonEmpty(params.get('MessageSid')) ?? nonEmpty(params.get('SmsSid'));
  const raw = (params.get('MessageStatus') || params.get('SmsStatus') || '').toLowerCase();
  const status = Object.hasOwn(STATUS_OF, raw) ? STATUS_OF[raw] : null;
  if (!sid || !status) return null;
  if (status !== 'failed') return { sid, status };
  return { sid, status, error: nonEmpty(params.get('ErrorCode')) ?? raw };
}

/**
 * Twilio's default keywords on long codes and toll-free numbers: opt-out STOP, STOPALL,
 * UNSUBSCRIBE, CANCEL, END, QUIT, and the newer REVOKE and OPTOUT; opt-in START, YES, UNSTOP;
 * help HELP, INFO.
 */
const KEYWORDS: ReadonlyMap<string, SmsKeyword> = new Map([
  ...['stop', 'stopall', 'unsubscribe', 'cancel', 'end', 'quit', 'revoke', 'optout'].map((word) => [word, 'stop'] as const),
  ...['start', 'yes', 'unstop'].map((word) => [word, 'start'] as const),
  ...['help', 'info'].map((word) => [word, 'help'] as const),
]);

/** Whitespace and punctuation around the one word of a message (`Stop.`, `"STOP"`, `stop!!`). */
const AROUND = /^[\s\p{P}]+|[\s\p{P}]+$/gu;

/**
 * The keyword a message is, as Twilio reads it: the whole message is one keyword, in any case
 * ("Stop please" and "please stop" are ordinary messages). Surrounding punctuation is tolerated,
 * which Twilio does not document either way: a customer's "Stop." is honoured rather than answered.
 *
 * `start` and `help` also answer ordinary questions ("Yes", "Info"): a caller treats `start` as an
 * opt-in only for a customer who opted out, and otherwise as the message it is.
 */
export function keywordOf(body: string): SmsKeyword | null {
  return KEYWORDS.get(body.replace(AROUND, '').toLowerCase()) ?? null;
}

/** The keyword of an incoming message: Twilio's `OptOutType` when it sent one (its Advanced Opt-Out may define other words), else `keywordOf` its body. */
export function inboundKeyword(sms: Pick<InboundSms, 'body' | 'optOutType'>): SmsKeyword | null {
  return sms.optOutType ? (sms.optOutType.toLowerCase() as SmsKeyword) : keywordOf(sms.body);
}

/** The Messages API's limit on `Body`, in characters. */
export const SMS_BODY_LIMIT = 1600;

const graphemes = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/**
 * Where to cut `text` (longer than `limit`) for its first part: after the latest paragraph, sentence
 * or word end that falls in the latter half of the first `limit` code units, else at the latest
 * grapheme boundary within them.
 */
function cutOf(text: string, limit: number): number {
  // Whitespace right after the first `limit` code units ends a word (or sentence) at the limit itself; the cut then falls after it, and trimming drops it.
  const window = text.slice(0, /\s/.test(text[limit]!) ? limit + 1 : limit);
  const latest = (pattern: RegExp): number => {
    let at = -1;
    for (const match of window.matchAll(pattern)) if (match.index + match[0].length > limit / 2) at = match.index + match[0].length;
    return at;
  };
  for (const pattern of [/\n[^\S\n]*\n\s*/g, /[.!?\u2026\u3002\uFF01\uFF1F]["'\u201D\u2019)\]]*\s+/g, /\s+/g]) {
    const at = latest(pattern);
    if (at > 0) return at;
  }
  let boundary = 0;
  for (const { index } of graphemes.segment(text.slice(0, limit + 32))) {
    if (index > limit) break;
    boundary = index;
  }
  // One grapheme (a long combining sequence) fills the window: cut between code points.
  if (boundary === 0) boundary = /[\uD800-\uDBFF]/.test(text[limit - 1]!) ? limit - 1 : limit;
  return boundary;
}

/**
 * Cuts a reply into messages of at most `limit` UTF-16 code units (never more characters than
 * Twilio counts), at a paragraph, sentence or word boundary where one falls in the latter half of a
 * part, never inside a surrogate pair or a grapheme. Parts are trimmed; none is empty (blank text
 * gives none).
 * @throws RangeError when `limit` is below 2 (a surrogate pair must fit).
 */
export function splitSms(text: string, limit = SMS_BODY_LIMIT): string[] {
  if (!Number.isSafeInteger(limit) || limit < 2) throw new RangeError('An SMS part holds at least 2 code units');
  const parts: string[] = [];
  let rest = text.trim();
  while (rest.length > limit) {
    const cut = cutOf(rest, limit);
    const part = rest.slice(0, cut).trimEnd();
    if (part) parts.push(part);
    rest = rest.slice(cut).trimStart();
  }
  if (rest) parts.push(rest);
  return parts;
}

/** Twilio's error answer: `{code, message, more_info, status}`. */
interface TwilioErrorBody {
  code?: number;
  message?: string;
}

/** A Messages API refusal: a ChannelError with Twilio's error code when it gave one. */
export class TwilioMessagingError extends ChannelError {
  constructor(message: string, retryable: boolean, status: number | undefined, readonly code: number | undefined, options?: ErrorOptions) {
    super(message, { retryable, status, vendorCode: code, cause: options?.cause });
  }
}

/** Twilio's code for a recipient who replied STOP to the sending number (HTTP 400): the customer is opted out there. */
export const TWILIO_UNSUBSCRIBED = 21610;

/** How long the Messages API may take to answer one request. */
const TWILIO_MESSAGING_TIMEOUT_MS = 10_000;

export interface TwilioMessagingOptions {
  /** @defaultValue https://api.twilio.com */
  apiUrl?: string;
  accountSid: string;
  authToken: string;
  /** @defaultValue 10000 (milliseconds) */
  timeoutMs?: number;
}

export interface TwilioMessaging {
  /**
   * Creates one outbound message. @returns Twilio's message sid and initial status (`queued`, or
   * `accepted` through a Messaging Service).
   * @throws TwilioMessagingError (a ChannelError): retryable when Twilio could not be reached, took
   * too long, answered 429 or 5xx; not for other refusals (21610, an unsubscribed recipient; bad numbers; bad credentials).
   */
  send(input: { from: string; to: string; body: string; statusCallback?: string }): Promise<{ sid: string; status: string }>;
}

export function createTwilioMessaging(options: TwilioMessagingOptions): TwilioMessaging {
  const url = `${(options.apiUrl ?? 'https://api.twilio.com').replace(/\/+$/, '')}/2010-04-01/Accounts/${encodeURIComponent(options.accountSid)}/Messages.json`;
  const authorization = `Basic ${Buffer.from(`${options.accountSid}:${options.authToken}`).toString('base64')}`;
  const timeoutMs = options.timeoutMs ?? TWILIO_MESSAGING_TIMEOUT_MS;
  return {
    async send(input) {
      const form = new URLSearchParams({ To: input.to, From: input.from, Body: input.body });
      if (input.statusCallback) form.set('StatusCallback', input.statusCallback);
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers: { authorization, accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
          body: form.toString(),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (cause) {
        throw new TwilioMessagingError('Twilio Messaging could not be reached', true, undefined, undefined, { cause });
      }
      let json: Record<string, unknown> = {};
      try {
        json = (await response.json()) as Record<string, unknown>;
      } catch (cause) {
        // A body cut off mid-answer is as good as no answer: worth retrying only where the status says so.
        if (response.ok) throw new TwilioMessagingError(`Twilio Messaging answered HTTP ${response.status} without a message`, false, response.status, undefined, { cause });
      }
      if (!response.ok) {
        const { code, message } = json as TwilioErrorBody;
        const words = [typeof code === 'number' ? `code ${code}` : '', typeof message === 'string' ? message : ''].filter(Boolean).join(': ');
        const retryable = response.status === 429 || response.status >= 500;
        throw new TwilioMessagingError(`Twilio Messaging refused the message (HTTP ${response.status}${words ? `, ${words}` : ''})`, retryable, response.status, typeof code === 'number' ? code : undefined);
      }
      if (typeof json.sid !== 'string') throw new TwilioMessagingError(`Twilio Messaging answered HTTP ${response.status} without a message`, false, response.status, undefined);
      return { sid: json.sid, status: typeof json.status === 'string' ? json.status : 'queued' };
    },
  };
}
