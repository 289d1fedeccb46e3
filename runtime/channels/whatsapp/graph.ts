import { ChannelError } from '../errors.js';
import { bareNumber } from '../../calls/carriers/rest.js';

/**
 * The few calls of Meta's Graph API a WhatsApp channel makes: send a text, mark a message read,
 * fetch a customer's media. Every request carries the channel's access token as a bearer token,
 * has a time limit, and any refusal becomes a ChannelError naming the HTTP status and Meta's words.
 */

export interface GraphClientOptions {
  /** The Graph API's origin, e.g. `https://graph.facebook.com` (no trailing path). */
  readonly apiUrl: string;
  /** The Graph API version path segment, e.g. `v21.0`. */
  readonly version: string;
  /**
   * How long one request may take, in milliseconds (a media download: both of its requests, each).
   * @defaultValue 10000
   */
  readonly timeoutMs?: number;
}

export interface GraphClient {
  /**
   * Sends `text` (at most 4096 characters: split it first) to `to` (E.164) from the business
   * number `phoneNumberId`. @returns Meta's id of the sent message (`wamid....`), which its
   * status webhooks name. @throws ChannelError
   */
  sendText(phoneNumberId: string, accessToken: string, to: string, text: string): Promise<{ id: string }>;
  /**
   * Reads the business number `phoneNumberId` with `accessToken`: Meta answers only a token that
   * reaches the number. @returns the number as Meta displays it. @throws ChannelError
   */
  phoneNumber(phoneNumberId: string, accessToken: string): Promise<{ displayPhoneNumber: string | undefined }>;
  /** Marks the customer's message `messageId` read (blue ticks). @throws ChannelError */
  markRead(phoneNumberId: string, accessToken: string, messageId: string): Promise<void>;
  /**
   * Fetches a customer's media: its metadata, then its bytes from the URL Meta gives (valid for
   * minutes). @throws ChannelError, not retryable, when it is larger than `maxBytes`.
   */
  downloadMedia(mediaId: string, accessToken: string, maxBytes: number): Promise<{ bytes: Buffer; mimeType: string }>;
}

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Meta's error codes that mean "later" although they may come with HTTP 400: throttling of the
 * app (4), of the business account (80007), of the number's throughput (130429) and of messages
 * to one customer (131056). A Graph error marked `is_transient` is retryable as well.
 */
const THROTTLED_CODES: ReadonlySet<number> = new Set([4, 80007, 130429, 131056]);

export function createGraphClient(options: GraphClientOptions): GraphClient {
  const origin = options.apiUrl.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const path = (...segments: string[]) => `${origin}/${encodeURIComponent(options.version)}/${segments.map(encodeURIComponent).join('/')}`;
  const call = (url: string, accessToken: string, body?: unknown) =>
    graphFetch(url, accessToken, timeoutMs, body === undefined ? { method: 'GET' } : { method: 'POST', body: JSON.stringify(body) });

  return {
    async sendText(phoneNumberId, accessToken, to, text) {
      const response = await call(path(phoneNumberId, 'messages'), accessToken, {
        messaging_product: 'whatsapp',
        recipient_type: 'individual',
        to: bareNumber(to),
        type: 'text',
        text: { preview_url: false, body: text },
      });
      const json = await jsonOf(response);
      const sent = Array.isArray(json.messages) ? (json.messages[0] as Record<string, unknown> | undefined) : undefined;
      // Not retryable: Meta accepted the request, so sending it again could deliver the text twice.
      if (typeof sent?.id !== 'string' || sent.id === '') throw new ChannelError('The WhatsApp Cloud API accepted the message but gave no message id', { retryable: false, status: response.status });
      return { id: sent.id };
    },

    async phoneNumber(phoneNumberId, accessToken) {
      const json = await jsonOf(await call(path(phoneNumberId), accessToken));
      return { displayPhoneNumber: typeof json.display_phone_number === 'string' ? json.display_phone_number : undefined };
    },

    async markRead(phoneNumberId, accessToken, messageId) {
      const response = await call(path(phoneNumberId, 'messages'), accessToken, { messaging_product: 'whatsapp', status: 'read', message_id: messageId });
      await response.arrayBuffer().catch(() => undefined);
    },

    async downloadMedia(mediaId, accessToken, maxBytes) {
      const meta = await jsonOf(await call(path(mediaId), accessToken));
      const url = typeof meta.url === 'string' ? meta.url : '';
      if (!/^https?:\/\//i.test(url)) throw new ChannelError('The WhatsApp Cloud API gave no download URL for the media', { retryable: false });
      const declared = Number(meta.file_size);
      if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);
      const response = await call(url, accessToken);
      const length = Number(response.headers.get('content-length') ?? Number.NaN);
      if (Number.isFinite(length) && length > maxBytes) {
        await response.body?.cancel().catch(() => undefined);
        throw tooLarge(maxBytes);
      }
      const bytes = await readCapped(response, maxBytes);
      const mimeType = (typeof meta.mime_type === 'string' && meta.mime_type) || response.headers.get('content-type') || 'application/octet-stream';
      return { bytes, mimeType };
    },
  };
}

const tooLarge = (maxBytes: number) => new ChannelError(`The media is larger than the ${maxBytes} bytes allowed`, { retryable: false });

/** One request with the bearer token and a time limit. @returns the response, when its status is 2xx. @throws ChannelError */
async function graphFetch(url: string, accessToken: string, timeoutMs: number, init: { method: string; body?: string }): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json', authorization: `Bearer ${accessToken}` };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(url, { method: init.method, headers, body: init.body, signal: AbortSignal.timeout(timeoutMs) });
  } catch (cause) {
    throw new ChannelError('The WhatsApp Cloud API could not be reached', { retryable: true, cause });
  }
  if (response.ok) return response;
  const body: unknown = await response.json().catch(() => undefined);
  const error: Record<string, unknown> = isRecord(body) && isRecord(body.error) ? body.error : {};
  const words = typeof error.message === 'string' && error.message ? `: ${error.message}` : '';
  const code = typeof error.code === 'number' ? error.code : undefined;
  const retryable = response.status === 429 || response.status >= 500 || error.is_transient === true || (code !== undefined && THROTTLED_CODES.has(code));
  throw new ChannelError(`The WhatsApp Cloud API refused the request (HTTP ${response.status}${words})`, { retryable, status: response.status, ...(code === undefined ? {} : { vendorCode: code }) });
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A 2xx body as JSON; an object that is not one (Meta always answers JSON) as {}. */
async function jsonOf(response: Response): Promise<Record<string, unknown>> {
  try {
    const json: unknown = await response.json();
    return isRecord(json) ? json : {};
  } catch (cause) {
    throw new ChannelError('The WhatsApp Cloud API answered with a body that is not JSON', { retryable: false, status: response.status, cause });
  }
}

/** The body, read until it ends or passes `maxBytes` (then the download is cut and refused). */
async function readCapped(response: Response, maxBytes: number): Promise<Buffer> {
  if (!response.body) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge(maxBytes);
      }
      chunks.push(value);
    }
  } catch (cause) {
    if (cause instanceof ChannelError) throw cause;
    throw new ChannelError('The WhatsApp media download broke off', { retryable: true, cause });
  }
  return Buffer.concat(chunks, total);
}
