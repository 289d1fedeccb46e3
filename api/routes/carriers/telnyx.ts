import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { texmlAnswer } from '../../../runtime/calls/carriers/telnyx.js';
import type { VoiceService } from '../../../runtime/calls/live.js';
import { PlatformError } from '../../../runtime/errors.js';
import type { ApiRequest, RouteDefinition } from '../../http/types.js';
import { formOf, twimlWebhookRoutes, unsignedWebhook } from './webhooks.js';

/**
 * Telnyx's TeXML voice webhook and status callbacks: form-encoded like Twilio's (`CallSid`,
 * `CallStatus`, `AnsweredBy`), answered with TeXML. When TELNYX_PUBLIC_KEY is set each must carry
 * `telnyx-signature-ed25519`, the base64 Ed25519 signature of `{telnyx-timestamp}|{raw body}`,
 * and a `telnyx-timestamp` (Unix seconds) at most 5 minutes from now, so a captured webhook cannot
 * be replayed later. Without the key unsigned webhooks are taken (for local use only: anyone who
 * can reach the server could then end calls or open them on your numbers).
 */

/** How far a webhook's timestamp may be from now, either way. */
export const TELNYX_SIGNATURE_TOLERANCE_MS = 5 * 60_000;

/** The account's Ed25519 public key from its base64 form (32 bytes, as Telnyx's portal shows it). */
export function telnyxPublicKey(base64: string): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(base64, 'base64').toString('base64url') }, format: 'jwk' });
}

/** Whether `signature` (base64) signs `{timestamp}|{body}` with `key`, and `timestamp` (Unix seconds) is recent at `nowMs`. */
export function telnyxSigned(key: KeyObject, timestamp: string, signature: string, body: Buffer, nowMs: number): boolean {
  if (!/^\d{1,12}$/.test(timestamp) || Math.abs(nowMs - Number(timestamp) * 1000) > TELNYX_SIGNATURE_TOLERANCE_MS) return false;
  const bytes = Buffer.from(signature, 'base64');
  if (bytes.length !== 64) return false;
  return verify(null, Buffer.concat([Buffer.from(`${timestamp}|`), body]), key, bytes);
}

export function telnyxRoutes(voice: VoiceService, options: { publicKey: string | undefined; acceptUnsigned: boolean; now?: () => number }): RouteDefinition[] {
  const key = options.publicKey ? telnyxPublicKey(options.publicKey) : undefined;
  const now = options.now ?? Date.now;
  function verified(req: ApiRequest): URLSearchParams {
    if (!key) unsignedWebhook('Telnyx', options.acceptUnsigned);
    else if (!telnyxSigned(key, req.headers['telnyx-timestamp'] ?? '', req.headers['telnyx-signature-ed25519'] ?? '', req.rawBody, now())) {
      throw new PlatformError('forbidden', { message: 'The Telnyx signature does not match.' });
    }
    return formOf(req);
  }
  return twimlWebhookRoutes(voice, { name: 'telnyx', title: 'Telnyx', markup: 'TeXML', verified, answer: texmlAnswer });
}
