import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Conditions } from '../helpers/conditions.js';

/**
 * A local stand-in for Meta's Graph API as a WhatsApp channel uses it, speaking its wire:
 * `POST /{version}/{phone_number_id}/messages` (a text, or `status: read`), `GET /{version}/{phone_number_id}`
 * (the business number, for a token of that number), `GET /{version}/{media_id}`
 * (media metadata whose `url` points back here) and `GET` of that URL (the bytes). Every request
 * must carry `Authorization: Bearer <token>` with a token registered for the phone number (any
 * registered token for media), else 401 with a Graph error body. Also the webhook bodies Meta
 * posts, built as Meta documents them, and their `X-Hub-Signature-256`.
 */

export interface SentText {
  readonly phoneNumberId: string;
  /** The recipient as it was on the wire: digits, no `+`. */
  readonly to: string;
  readonly text: string;
  /** The id the fake answered with (`wamid.<counter>`). */
  readonly id: string;
}

export interface WhatsAppFake {
  /** The fake's origin, to pass as the Graph API's `apiUrl`. */
  readonly apiUrl: string;
  /** Texts accepted, in order. */
  readonly sent: SentText[];
  /** Messages marked read, in order. */
  readonly reads: Array<{ readonly phoneNumberId: string; readonly messageId: string }>;
  /** Every request, answered or refused, in order (`authorization` as received). */
  readonly requests: Array<{ readonly method: string; readonly path: string; readonly authorization: string | undefined; readonly status: number }>;
  /** Accepts `accessToken` for `phoneNumberId` (and for media). */
  token(phoneNumberId: string, accessToken: string): void;
  /** Serves media `id` with these bytes and MIME type. */
  media(id: string, bytes: Uint8Array, mimeType: string): void;
  /** Refuses the next `count` text sends with `status` and a Graph error body (code 130429 for 429, 131000 for 5xx, 100 otherwise). */
  failSends(count: number, status: number): void;
  /** Resolves once `count` texts have been accepted (counting from the fake's start). */
  waitForSent(count: number): Promise<void>;
  /** Resolves once `count` messages have been marked read. */
  waitForReads(count: number): Promise<void>;
  close(): Promise<void>;
}

/** Meta's error body: `{error: {message, type, code, error_subcode?, fbtrace_id}}`. */
export function graphError(code: number, message: string, type = 'OAuthException'): { error: Record<string, unknown> } {
  return { error: { message, type, code, fbtrace_id: 'AbCdEfGhIjKlMnOpQrStUv' } };
}

export async function startWhatsAppFake(tokens: Record<string, string> = {}): Promise<WhatsAppFake> {
  const accepted = new Map<string, Set<string>>();
  const media = new Map<string, { bytes: Buffer; mimeType: string }>();
  const sent: SentText[] = [];
  const reads: WhatsAppFake['reads'] = [];
  const requests: Array<WhatsAppFake['requests'][number]> = [];
  const arrivals = new Conditions();
  let failures: { count: number; status: number } | undefined;
  let counter = 0;
  const token = (phoneNumberId: string, accessToken: string) => accepted.set(phoneNumberId, (accepted.get(phoneNumberId) ?? new Set()).add(accessToken));
  for (const [phoneNumberId, accessToken] of Object.entries(tokens)) token(phoneNumberId, accessToken);

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const answer = (status: number, body: unknown, type = 'application/json') => {
        requests.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, status });
        res.writeHead(status, { 'content-type': type });
        res.end(Buffer.isBuffer(body) ? body : JSON.stringify(body));
        arrivals.changed();
      };
      handle(req, Buffer.concat(chunks).toString(), answer);
    });
  });

  function authorised(req: IncomingMessage, phoneNumberId: string | undefined): boolean {
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (bearer === undefined) return false;
    if (phoneNumberId !== undefined) return accepted.get(phoneNumberId)?.has(bearer) ?? false;
    return [...accepted.values()].some((set) => set.has(bearer));
  }

  function handle(req: IncomingMessage, raw: string, answer: (status: number, body: unknown, type?: string) => void): void {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    const download = /^\/media-download\/([^/]+)$/.exec(path);
    const route = /^\/v\d+\.\d+\/([^/]+)(\/messages)?$/.exec(path);
    const phoneNumberId = route?.[2] ? decodeURIComponent(route[1]!) : undefined;
    if (!download && !route) return answer(404, graphError(100, 'Unsupported request - method type: ' + (req.method ?? '').toLowerCase(), 'GraphMethodException'));
    if (!authorised(req, phoneNumberId)) return answer(401, graphError(190, 'Invalid OAuth access token - Cannot parse access token'));
    if (download) {
      const found = media.get(decodeURIComponent(download[1]!));
      return found ? answer(200, found.bytes, found.mimeType) : answer(404, graphError(100, 'Media not found'));
    }
    if (phoneNumberId === undefined) {
      const id = decodeURIComponent(route![1]!);
      // A business number's node, read only with a token of that number.
      if (req.method === 'GET' && accepted.has(id)) {
        if (!authorised(req, id)) return answer(400, graphError(100, `Unsupported get request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation`, 'GraphMethodException'));
        return answer(200, { verified_name: 'Test Business', code_verification_status: 'VERIFIED', display_phone_number: '+1 555-078-3881', quality_rating: 'GREEN', id });
      }
      const found = media.get(id);
      if (req.method !== 'GET' || !found) return answer(400, graphError(100, `Unsupported get request. Object with ID '${id}' does not exist`, 'GraphMethodException'));
      return answer(200, { url: `${apiUrl}/media-download/${encodeURIComponent(id)}`, mime_type: found.mimeType, sha256: 'not-checked', file_size: String(found.bytes.byteLength), id, messaging_product: 'whatsapp' });
    }
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      return answer(400, graphError(100, 'Invalid parameter'));
    }
    if (req.method !== 'POST' || body.messaging_product !== 'whatsapp') return answer(400, graphError(100, 'The parameter messaging_product is required.'));
    if (body.status === 'read') {
      if (typeof body.message_id !== 'string') return answer(400, graphError(100, 'Invalid parameter'));
      reads.push({ phoneNumberId, messageId: body.message_id });
      return answer(200, { success: true });
    }
    const text = body.text as { body?: unknown } | undefined;
    if (body.type !== 'text' || typeof body.to !== 'string' || !/^\d{6,15}$/.test(body.to) || typeof text?.body !== 'string' || text.body === '' || text.body.length > 4096) {
      return answer(400, graphError(100, 'Invalid parameter'));
    }
    if (failures && failures.count > 0) {
      failures.count -= 1;
      const status = failures.status;
      const code = status === 429 ? 130429 : status >= 500 ? 131000 : 100;
      return answer(status, graphError(code, status === 429 ? '(#130429) Rate limit hit' : status >= 500 ? '(#131000) Something went wrong' : '(#100) Invalid parameter'));
    }
    const id = `wamid.${++counter}`;
    sent.push({ phoneNumberId, to: body.to, text: text.body, id });
    answer(200, { messaging_product: 'whatsapp', contacts: [{ input: body.to, wa_id: body.to }], messages: [{ id }] });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    apiUrl,
    sent,
    reads,
    requests,
    token,
    media(id, bytes, mimeType) {
      media.set(id, { bytes: Buffer.from(bytes), mimeType });
    },
    failSends(count, status) {
      failures = { count, status };
    },
    waitForSent: (count) => arrivals.until(() => sent.length >= count),
    waitForReads: (count) => arrivals.until(() => reads.length >= count),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** `sha256=<hex HMAC-SHA256 of the exact body bytes, keyed with the app secret>`, as Meta signs a webhook. */
export function signHub(appSecret: string, rawBody: string | Uint8Array): string {
  return `sha256=${createHmac('sha256', appSecret).update(rawBody).digest('hex')}`;
}

interface Sender {
  readonly phoneNumberId: string;
  /** The customer: E.164 or bare digits (written bare, as Meta does). */
  readonly from: string;
  /** Meta's message id, e.g. `wamid.HBgL...`. */
  readonly id: string;
  /** Unix seconds; now when omitted. */
  readonly timestamp?: number;
  /** The customer's profile name. */
  readonly name?: string;
  /** The business number as displayed. */
  readonly displayPhoneNumber?: string;
}

type WebhookBody = { object: 'whatsapp_business_account'; entry: Array<{ id: string; changes: Array<{ field: 'messages'; value: Record<string, unknown> }> }> };

/** The envelope Meta wraps every `messages` notification in. */
function notification(phoneNumberId: string, displayPhoneNumber: string | undefined, value: Record<string, unknown>): WebhookBody {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: '102290129340398',
        changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: displayPhoneNumber ?? '15550783881', phone_number_id: phoneNumberId }, ...value } }],
      },
    ],
  };
}

function inbound(sender: Sender, type: string, content: Record<string, unknown>, extra: Record<string, unknown> = {}): WebhookBody {
  const waId = sender.from.replace(/^\+/, '');
  return notification(sender.phoneNumberId, sender.displayPhoneNumber, {
    contacts: [{ profile: { name: sender.name ?? 'Sheena Nelson' }, wa_id: waId }],
    messages: [{ from: waId, id: sender.id, timestamp: String(sender.timestamp ?? Math.floor(Date.now() / 1000)), type, [type]: content, ...extra }],
  });
}

export function textMessageWebhook(options: Sender & { readonly text: string }): WebhookBody {
  return inbound(options, 'text', { body: options.text });
}

/** An audio (voice note), image or location message; media kinds carry `mediaId` (and `mimeType`). */
export function mediaMessageWebhook(options: Sender & { readonly kind: 'audio' | 'image' | 'location'; readonly mediaId?: string; readonly mimeType?: string; readonly caption?: string }): WebhookBody {
  if (options.kind === 'location') return inbound(options, 'location', { latitude: 38.9806263495, longitude: -131.9519297481, name: 'Philz Coffee', address: '101 Forest Ave, Palo Alto, CA 94301' });
  const mimeType = options.mimeType ?? (options.kind === 'audio' ? 'audio/ogg; codecs=opus' : 'image/jpeg');
  const content: Record<string, unknown> = { mime_type: mimeType, sha256: 'bFrJRW8rB0u7nEsq3RXiNIFFdyD3lALxVRpjX8pT2rs=', id: options.mediaId ?? '1003383421387256' };
  if (options.kind === 'audio') content.voice = true;
  if (options.caption !== undefined) content.caption = options.caption;
  return inbound(options, options.kind, content);
}

/**
 * The customer tapped a reply button (`interactive`/`button_reply`, the default), a list row
 * (`list`), or a template's quick-reply button (`template`, Meta's type `button`).
 */
export function buttonReplyWebhook(options: Sender & { readonly title: string; readonly buttonId?: string; readonly style?: 'button' | 'list' | 'template'; readonly replyTo?: string }): WebhookBody {
  const context = { context: { from: options.displayPhoneNumber ?? '15550783881', id: options.replyTo ?? 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA' } };
  const buttonId = options.buttonId ?? 'choice-1';
  if (options.style === 'template') return inbound(options, 'button', { payload: buttonId, text: options.title }, context);
  const interactive =
    options.style === 'list'
      ? { type: 'list_reply', list_reply: { id: buttonId, title: options.title, description: 'A row of the list' } }
      : { type: 'button_reply', button_reply: { id: buttonId, title: options.title } };
  return inbound(options, 'interactive', interactive, context);
}

export function statusWebhook(options: {
  readonly phoneNumberId: string;
  /** The wamid the Graph API gave the sent message. */
  readonly id: string;
  readonly status: 'sent' | 'delivered' | 'read' | 'failed' | (string & {});
  /** E.164 or bare digits (written bare, as Meta does). */
  readonly recipient: string;
  readonly timestamp?: number;
  readonly errors?: ReadonlyArray<{ readonly code: number; readonly title: string; readonly message?: string; readonly details?: string }>;
  readonly displayPhoneNumber?: string;
}): WebhookBody {
  const recipientId = options.recipient.replace(/^\+/, '');
  const status: Record<string, unknown> = { id: options.id, status: options.status, timestamp: String(options.timestamp ?? Math.floor(Date.now() / 1000)), recipient_id: recipientId };
  if (options.status !== 'failed' && options.status !== 'read') {
    status.conversation = { id: 'CONVERSATION_ID', origin: { type: 'service' } };
    status.pricing = { billable: false, pricing_model: 'PMP', category: 'service' };
  }
  if (options.errors) {
    status.errors = options.errors.map((error) => ({
      code: error.code,
      title: error.title,
      message: error.message ?? error.title,
      error_data: { details: error.details ?? error.title },
      href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/',
    }));
  }
  return notification(options.phoneNumberId, options.displayPhoneNumber, { statuses: [status] });
}
