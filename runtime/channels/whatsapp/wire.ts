import { createHmac } from 'node:crypto';
import { sameDigest } from '../../auth/secrets.js';
import { plusNumber } from '../../calls/carriers/rest.js';

/**
 * The WhatsApp Business Cloud API as it comes over the wire: the signature Meta puts on every
 * webhook (`X-Hub-Signature-256`), the webhook body of the `messages` field (inbound messages and
 * status updates), and the splitting of a reply to fit a text message. Pure: no database, no I/O.
 * The Graph API client lives in graph.ts and is re-exported here.
 */

export { createGraphClient, type GraphClient, type GraphClientOptions } from './graph.js';

/** What WhatsApp accepts as one text message body, in characters (counted here as UTF-16 units, which never undercounts). */
export const WHATSAPP_TEXT_LIMIT = 4096;

/**
 * Whether `header` is Meta's signature of `rawBody`: `sha256=` and the lower- or upper-case hex
 * HMAC-SHA256 of the exact bytes received, keyed with the app secret. Compared in constant time.
 * False for a missing or malformed header, and for an empty app secret (nothing can be verified).
 */
export function verifyHubSignature(appSecret: string, rawBody: Uint8Array, header: string | undefined): boolean {
  if (!appSecret || typeof header !== 'string') return false;
  const match = /^sha256=([0-9a-fA-F]{64})$/.exec(header.trim());
  if (!match) return false;
  const expected = createHmac('sha256', appSecret).update(rawBody).digest();
  return sameDigest(Buffer.from(match[1]!, 'hex'), expected);
}

export type MessageKind =
  | 'text'
  | 'audio'
  | 'image'
  | 'video'
  | 'document'
  | 'sticker'
  | 'location'
  | 'contacts'
  | 'interactive'
  | 'button'
  | 'reaction'
  | 'unsupported'
  | (string & {});

export interface InboundMessage {
  /** Meta's message id (`wamid....`); the same on every retry of the webhook. */
  readonly id: string;
  /** The customer's number in E.164 (`+` and digits). */
  readonly from: string;
  /** When the customer sent it, in unix seconds. */
  readonly timestamp: number;
  /** The customer's WhatsApp profile name, when Meta sent one. */
  readonly profileName?: string;
  /**
   * What the customer wrote or chose: the body of a text, the title of a tapped reply button or
   * list row (`interactive`), the text of a template's quick-reply button (`button`). Absent for
   * every other kind (a media caption is in `caption`).
   */
  readonly text?: string;
  /** Meta's message type; kinds Meta adds later come through as they are named. */
  readonly kind: MessageKind;
  /** The media of an audio, image, video, document or sticker message (fetch it with `downloadMedia`). */
  readonly media?: { readonly id: string; readonly mimeType?: string };
  /** The caption the customer put on an image, video or document. */
  readonly caption?: string;
  /** The place of a location message. */
  readonly location?: { readonly latitude: number; readonly longitude: number; readonly name?: string; readonly address?: string };
  /** The message a reaction is about, and the emoji (empty when the reaction was removed). */
  readonly reaction?: { readonly messageId: string; readonly emoji: string };
  /** The message this one replies to (the customer quoted it, or tapped a button on it). */
  readonly replyTo?: string;
}

export type DeliveryStatus = 'sent' | 'delivered' | 'read' | 'failed';

export interface StatusUpdate {
  /** The id (`wamid....`) the Graph API gave the message we sent. */
  readonly id: string;
  readonly status: DeliveryStatus;
  /** Who the message went to: E.164 (`+` and digits) when Meta gave digits, else as Meta wrote it. */
  readonly recipient: string;
  /** When the message reached this status, in unix seconds. */
  readonly timestamp: number;
  /** Why it failed: the first error's title and details, with Meta's code. */
  readonly error?: string;
}

export interface WhatsAppNotification {
  /** The business phone number the notification is for (routes it to its channel). */
  readonly phoneNumberId: string;
  readonly messages: InboundMessage[];
  readonly statuses: StatusUpdate[];
}

/**
 * How many elements of any one array of a webhook body are looked at. Meta batches far fewer;
 * the bound keeps a hostile body (already capped in bytes by the route) from costing more than a
 * pass over this many items per array.
 */
const MAX_ITEMS = 1000;

const STATUSES: ReadonlySet<string> = new Set<DeliveryStatus>(['sent', 'delivered', 'read', 'failed']);
const MEDIA_KINDS: ReadonlySet<string> = new Set(['audio', 'image', 'video', 'document', 'sticker']);

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
const items = (value: unknown): unknown[] => (Array.isArray(value) ? value.slice(0, MAX_ITEMS) : []);
/** A non-empty string field; none when it holds U+0000 (no id or name of Meta's does; PostgreSQL's text cannot). */
const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' && !value.includes('\u0000') ? value : undefined);
const finite = (value: unknown): number | undefined => {
  const number = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof number === 'number' && Number.isFinite(number) ? number : undefined;
};
/** Meta's unix-seconds timestamp (sent as a string of digits). */
const seconds = (value: unknown): number | undefined => {
  const number = finite(value);
  return number !== undefined && number >= 0 && Number.isInteger(number) ? number : undefined;
};

/**
 * The notifications of a webhook body of the `messages` field, one per business phone number
 * (changes for the same number are merged, in order); a number's change with neither messages nor
 * statuses (an `errors` report, statuses of kinds this platform does not record) still names its
 * number, so its signature is checked and it is acknowledged. Never throws: a body that is not a `whatsapp_business_account` notification gives
 * [], and any malformed entry, change, message or status (a missing id, a sender that is not a
 * number, an unknown status) is skipped on its own.
 */
export function parseWebhook(body: unknown): WhatsAppNotification[] {
  if (!isObject(body) || body.object !== 'whatsapp_business_account') return [];
  const byNumber = new Map<string, { messages: InboundMessage[]; statuses: StatusUpdate[] }>();
  for (const entry of items(body.entry)) {
    if (!isObject(entry)) continue;
    for (const change of items(entry.changes)) {
      if (!isObject(change) || change.field !== 'messages' || !isObject(change.value)) continue;
      const value = change.value;
      const phoneNumberId = isObject(value.metadata) ? text(value.metadata.phone_number_id) : undefined;
      if (phoneNumberId === undefined) continue;
      const names = profileNames(value.contacts);
      const messages = items(value.messages).flatMap((message) => inboundMessage(message, names) ?? []);
      const statuses = items(value.statuses).flatMap((status) => statusUpdate(status) ?? []);
      const found = byNumber.get(phoneNumberId) ?? { messages: [], statuses: [] };
      found.messages.push(...messages);
      found.statuses.push(...statuses);
      byNumber.set(phoneNumberId, found);
    }
  }
  return [...byNumber].map(([phoneNumberId, found]) => ({ phoneNumberId, ...found }));
}

/** Profile names by WhatsApp id; a lone contact is also the sender's when the ids differ (Meta may normalise a number). */
function profileNames(contacts: unknown): { byId: Map<string, string>; only?: string } {
  const byId = new Map<string, string>();
  const list = items(contacts).filter(isObject);
  for (const contact of list) {
    const id = text(contact.wa_id);
    const name = isObject(contact.profile) ? text(contact.profile.name) : undefined;
    if (id !== undefined && name !== undefined) byId.set(id, name);
  }
  const only = list.length === 1 && isObject(list[0]!.profile) ? text(list[0]!.profile.name) : undefined;
  return only === undefined ? { byId } : { byId, only };
}

function inboundMessage(raw: unknown, names: ReturnType<typeof profileNames>): InboundMessage | undefined {
  if (!isObject(raw)) return undefined;
  const id = text(raw.id);
  const from = text(raw.from);
  const timestamp = seconds(raw.timestamp);
  const kind = text(raw.type);
  if (id === undefined || from === undefined || !/^\d{6,15}$/.test(from) || timestamp === undefined || kind === undefined) return undefined;
  const message: { -readonly [K in keyof InboundMessage]: InboundMessage[K] } = { id, from: `+${from}`, timestamp, kind };
  const profileName = names.byId.get(from) ?? names.only;
  if (profileName !== undefined) message.profileName = profileName;
  const replyTo = isObject(raw.context) ? text(raw.context.id) : undefined;
  if (replyTo !== undefined) message.replyTo = replyTo;
  const content = raw[kind];
  if (!isObject(content)) return kind === 'text' ? undefined : message;
  if (kind === 'text') {
    const body = typeof content.body === 'string' ? content.body : undefined;
    if (body === undefined) return undefined;
    message.text = body;
  } else if (kind === 'interactive') {
    const reply = content.type === 'button_reply' ? content.button_reply : content.type === 'list_reply' ? content.list_reply : undefined;
    const title = isObject(reply) ? text(reply.title) : undefined;
    if (title !== undefined) message.text = title;
  } else if (kind === 'button') {
    const chosen = text(content.text) ?? text(content.payload);
    if (chosen !== undefined) message.text = chosen;
  } else if (MEDIA_KINDS.has(kind)) {
    const mediaId = text(content.id);
    if (mediaId !== undefined) {
      const mimeType = text(content.mime_type);
      message.media = mimeType === undefined ? { id: mediaId } : { id: mediaId, mimeType };
    }
    const caption = text(content.caption);
    if (caption !== undefined) message.caption = caption;
  } else if (kind === 'location') {
    const latitude = finite(content.latitude);
    const longitude = finite(content.longitude);
    if (latitude !== undefined && longitude !== undefined) {
      const name = text(content.name);
      const address = text(content.address);
      message.location = { latitude, longitude, ...(name === undefined ? {} : { name }), ...(address === undefined ? {} : { address }) };
    }
  } else if (kind === 'reaction') {
    const messageId = text(content.message_id);
    if (messageId !== undefined) message.reaction = { messageId, emoji: typeof content.emoji === 'string' ? content.emoji : '' };
  }
  return message;
}

function statusUpdate(raw: unknown): StatusUpdate | undefined {
  if (!isObject(raw)) return undefined;
  const id = text(raw.id);
  const status = text(raw.status);
  const recipient = text(raw.recipient_id);
  const timestamp = seconds(raw.timestamp);
  if (id === undefined || status === undefined || !STATUSES.has(status) || recipient === undefined || timestamp === undefined) return undefined;
  const update: StatusUpdate = { id, status: status as DeliveryStatus, recipient: plusNumber(recipient), timestamp };
  const error = firstError(raw.errors);
  return error === undefined ? update : { ...update, error };
}

/** `Title (code): details` of Meta's first error, as much of it as Meta gave. */
function firstError(errors: unknown): string | undefined {
  const first = items(errors).find(isObject);
  if (first === undefined) return undefined;
  const title = text(first.title) ?? text(first.message);
  const details = isObject(first.error_data) ? text(first.error_data.details) : undefined;
  const code = finite(first.code);
  const head = [title, code === undefined ? undefined : `(${code})`].filter((part) => part !== undefined).join(' ');
  const words = details !== undefined && details !== title ? (head ? `${head}: ${details}` : details) : head;
  return words || undefined;
}

/** A paragraph break (a blank line), a sentence end followed by white space, any white space. */
const BOUNDARIES: readonly RegExp[] = [/\n[^\S\n]*\n\s*/g, /(?<=[.!?…。！？]["'”’)\]]*)\s+/g, /\s+/g];

/**
 * Cuts a reply into text messages of at most `limit` UTF-16 units each: at the last paragraph
 * break that fits, else the last sentence end, else the last white space, else (one long word) at
 * the limit, stepping back one unit rather than cutting a surrogate pair. Parts are trimmed and
 * never empty; white space alone gives [].
 */
export function splitText(input: string, limit = WHATSAPP_TEXT_LIMIT): string[] {
  if (!Number.isInteger(limit) || limit < 2) throw new RangeError('splitText needs a limit of at least 2');
  const parts: string[] = [];
  let rest = input.trim();
  while (rest.length > limit) {
    const [end, next] = cutAt(rest, limit);
    parts.push(rest.slice(0, end).trimEnd());
    rest = rest.slice(next).trimStart();
  }
  if (rest !== '') parts.push(rest);
  return parts;
}

/** Where the first part of `text` (longer than `limit`, trimmed) ends, and where the rest starts. */
function cutAt(text: string, limit: number): [end: number, next: number] {
  // A boundary whose white space starts at `limit` still leaves a first part of `limit` units.
  const window = text.slice(0, limit + 1);
  for (const boundary of BOUNDARIES) {
    let last: RegExpExecArray | undefined;
    for (const match of window.matchAll(boundary)) if (match.index > 0) last = match as RegExpExecArray;
    if (last !== undefined) return [last.index, last.index + last[0].length];
  }
  const code = text.charCodeAt(limit - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? limit - 1 : limit;
  return [end, end];
}
