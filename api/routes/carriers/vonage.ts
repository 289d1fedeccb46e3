import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { plusNumber } from '../../../runtime/calls/carriers/rest.js';
import { nccoAnswer } from '../../../runtime/calls/carriers/vonage.js';
import type { AnsweredBy, CarrierStatus } from '../../../runtime/calls/carriers/types.js';
import type { VoiceService } from '../../../runtime/calls/live.js';
import { PlatformError } from '../../../runtime/errors.js';
import type { ApiRequest, RouteDefinition } from '../../http/types.js';
import { CARRIER_ERRORS, jsonField, markupResponse, statusCallId, unsignedWebhook } from './webhooks.js';
import { body, noBody } from '../../http/contract.js';
import { anyObject, array } from '../../../schemas/shapes.js';

/**
 * Vonage's answer webhook (`GET` with the call in the query string, or `POST` with it as JSON),
 * answered with an NCCO, and its event webhook (`POST`, JSON). When VONAGE_SIGNATURE_SECRET is set
 * each must carry `Authorization: Bearer <JWT>`, signed HS256 with that secret, issued (`iat`) at
 * most 5 minutes from now, not expired (`exp`, when present), for this application
 * (`application_id`, when present) and for this very payload: `payload_hash` is the SHA-256 (hex)
 * of the body of a `POST`, or of the query's fields as compact JSON for a `GET`. Without the secret
 * unsigned webhooks are taken (for local use only).
 */

/** How far a webhook's `iat` may be from now, either way. */
export const VONAGE_SIGNATURE_TOLERANCE_MS = 5 * 60_000;

interface WebhookClaims {
  iat?: unknown;
  exp?: unknown;
  payload_hash?: unknown;
  application_id?: unknown;
}

/** The JWT's claims when `authorization` is a bearer token signed HS256 with `secret`; undefined otherwise. */
function signedClaims(secret: string, authorization: string): WebhookClaims | undefined {
  const match = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(authorization);
  if (!match) return undefined;
  const [, header, claims, signature] = match as unknown as [string, string, string, string];
  const expected = createHmac('sha256', secret).update(`${header}.${claims}`).digest();
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    if ((JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as { alg?: unknown } | null)?.alg !== 'HS256') return undefined;
    const parsed = JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as WebhookClaims | null;
    return parsed !== null && typeof parsed === 'object' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a webhook carrying `authorization` and `payload` was signed by Vonage for `applicationId`, recently as of `nowMs`. */
export function vonageSigned(secret: string, authorization: string, payload: Buffer | string, nowMs: number, applicationId?: string): boolean {
  const claims = signedClaims(secret, authorization);
  if (!claims || typeof claims.iat !== 'number' || Math.abs(nowMs - claims.iat * 1000) > VONAGE_SIGNATURE_TOLERANCE_MS) return false;
  if (claims.exp !== undefined && (typeof claims.exp !== 'number' || nowMs >= claims.exp * 1000)) return false;
  if (applicationId && claims.application_id !== undefined && claims.application_id !== applicationId) return false;
  return typeof claims.payload_hash === 'string' && claims.payload_hash.toLowerCase() === createHash('sha256').update(payload).digest('hex');
}

/** Vonage's call `status` in the words every carrier's comes down to (`started`: nothing to act on). */
const STATUSES: Readonly<Record<string, CarrierStatus>> = {
  ringing: 'ringing',
  answered: 'answered',
  completed: 'completed',
  busy: 'busy',
  timeout: 'no-answer',
  unanswered: 'no-answer',
  cancelled: 'canceled',
  failed: 'failed',
  rejected: 'failed',
};

/** Machine detection reports as a status of its own: `human`, or `machine` (with a `sub_state` such as `beep_start`). */
const VERDICTS: Readonly<Record<string, AnsweredBy>> = { human: 'human', machine: 'machine' };

export function vonageRoutes(voice: VoiceService, options: { signatureSecret: string | undefined; acceptUnsigned: boolean; applicationId?: string; now?: () => number }): RouteDefinition[] {
  const now = options.now ?? Date.now;
  /** The webhook's fields: the JSON body of a POST, the query string of a GET. */
  function verified(req: ApiRequest): unknown {
    const query = req.method === 'GET' ? Object.fromEntries(new URLSearchParams(req.rawQuery)) : undefined;
    if (!options.signatureSecret) unsignedWebhook('Vonage', options.acceptUnsigned);
    else {
      const payload = query ? JSON.stringify(query) : req.rawBody;
      if (!vonageSigned(options.signatureSecret, req.headers.authorization ?? '', payload, now(), options.applicationId)) {
        throw new PlatformError('forbidden', { message: 'The Vonage signature does not match.' });
      }
    }
    return query ?? req.body;
  }
  async function answer(req: ApiRequest) {
    const fields = verified(req);
    const call = { to: plusNumber(jsonField(fields, 'to')), from: plusNumber(jsonField(fields, 'from')), carrierCallId: jsonField(fields, 'uuid'), requestId: req.id };
    return markupResponse(nccoAnswer(await voice.inbound('vonage', call)));
  }
  const summary = "Vonage's answer webhook for calls to your numbers: answers an NCCO that connects the call to its inbound assistant";
  const answered = { errors: CARRIER_ERRORS, responses: { 200: body(array(anyObject('An NCCO action (talk, connect, ...)'), 'The NCCO for Vonage')) } };
  return [
    { method: 'GET', path: '/api/telephony/vonage/inbound', auth: 'none', duringStop: true, tag: 'Telephony', summary, ...answered, handler: answer },
    { method: 'POST', path: '/api/telephony/vonage/inbound', auth: 'none', duringStop: true, tag: 'Telephony', summary, ...answered, handler: answer },
    {
      method: 'POST',
      path: '/api/telephony/vonage/status',
      auth: 'none',
      duringStop: true,
      tag: 'Telephony',
      errors: CARRIER_ERRORS,
      responses: { 200: noBody('Taken; nothing more is asked of the call') },
      summary: "Vonage's event webhook (ringing, answered, busy, timeout, failed, completed, ...) and machine-detection result",
      async handler(req) {
        const fields = verified(req);
        const callId = statusCallId(req);
        const status = jsonField(fields, 'status');
        // Events of calls the platform did not place (an inbound call's, sent to the application's event URL) name no call: the media stream speaks for those.
        if (callId !== undefined) await voice.carrierStatus('vonage', callId, jsonField(fields, 'uuid'), Object.hasOwn(STATUSES, status) ? STATUSES[status] : undefined, Object.hasOwn(VERDICTS, status) ? VERDICTS[status] : undefined);
        // An empty 200: nothing more is asked of the call (a body could be taken for an NCCO).
        return { status: 200 };
      },
    },
  ];
}
