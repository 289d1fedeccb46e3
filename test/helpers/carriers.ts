import type { Test } from 'tap';
import { twilioSignature } from '../../api/routes/carriers/twilio.js';
import { MediaStreamPhone } from '../../runtime/calls/carriers/loopback.js';
import type { ManualClock } from '../../runtime/clock.js';
import type { Config } from '../../runtime/config.js';
import { startFakeTelnyx, telnyxCallSid, texmlStream, TelnyxPhone } from '../fakes/telnyx.js';
import { startFakeTwilio } from '../fakes/twilio.js';
import { SimulatedPhone } from './phone.js';
import type { ApiResult, TestPlatform } from './platform.js';

/**
 * Each carrier behind one face, so the same call tests run over every carrier: its fake's
 * credentials as configuration, its webhooks signed as the carrier signs them, its phone joining
 * the media stream its markup names, and what its REST API was asked, in words every carrier's
 * comes down to.
 */

/** How a webhook is signed: rightly, not at all, over another body, or (where the carrier dates its signatures) too long ago. */
export type Signing = 'good' | 'none' | 'tampered' | 'stale';

/** A call the platform asked the carrier to place. */
export interface PlacedCall {
  readonly carrierCallId: string;
  readonly to: string;
  readonly from: string;
  /** The carrier's markup run once the callee answers (it connects the media stream). */
  readonly markup: string;
  readonly statusUrl: string;
  /** Where the answering-machine verdict goes; undefined when not asked for. */
  readonly amdUrl: string | undefined;
}

/** A change to a live call the platform asked of the carrier. */
export interface CallUpdate {
  readonly carrierCallId: string;
  /** The number the call was redirected to (a transfer). */
  readonly dial?: string;
  /** The status the call was set to (a hang-up). */
  readonly status?: string;
}

export interface CarrierRig {
  readonly name: 'twilio' | 'telnyx';
  /** The carrier's credentials at its fake, webhook signatures required. */
  readonly config: Partial<Config>;
  /** The signings a webhook is refused for (403). */
  readonly refused: readonly Signing[];
  /** The status a call given up while ringing is set to. */
  readonly ringingHangUp: string;
  /** A new call id as the carrier writes them. */
  callSid(): string;
  /** The carrier's voice webhook for a call from `from` to `to`. */
  inbound(api: TestPlatform, call: { to: string; from: string; carrierCallId: string }, signing?: Signing): Promise<ApiResult>;
  /** A status callback for the platform's call `callId` (its status, answering-machine verdict, both or neither, in the carrier's words). */
  status(api: TestPlatform, callId: number, fields: { carrierCallId: string; status?: string; answeredBy?: string }, signing?: Signing): Promise<ApiResult>;
  /** The carrier's phone joins the stream the markup names; resolves once the platform has taken it. */
  connect(markup: string, call: { carrierCallId: string; from: string; to: string }, clock: ManualClock): Promise<{ phone: SimulatedPhone; callId: number }>;
  /** The calls the platform placed, in order. */
  placed(): PlacedCall[];
  /** The changes to live calls it asked for, in order. */
  updates(): CallUpdate[];
}

const FORM = 'application/x-www-form-urlencoded';
const unescapeXml = (text: string) => text.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const dialOf = (markup: string | null | undefined) => (markup ? /<Dial>([^<]+)<\/Dial>/.exec(markup)?.[1] : undefined);

async function joined(line: { open(): Promise<void>; sync(): Promise<void> } & ConstructorParameters<typeof SimulatedPhone>[0], clock: ManualClock, callId: number) {
  await line.open();
  await line.sync();
  return { phone: new SimulatedPhone(line, clock), callId };
}

export async function twilioRig(t: Test): Promise<CarrierRig> {
  const accountSid = 'AC0123456789abcdef0123456789abcdef';
  const authToken = 'twilio-auth-token';
  const fake = await startFakeTwilio(t, accountSid, authToken);
  let sids = 0;
  async function post(api: TestPlatform, path: string, fields: Record<string, string>, signing: Signing): Promise<ApiResult> {
    const params = new URLSearchParams(fields);
    const headers: Record<string, string> = { 'content-type': FORM };
    if (signing !== 'none') {
      const signed = signing === 'tampered' ? new URLSearchParams({ ...fields, CallSid: 'CA-other' }) : params;
      headers['x-twilio-signature'] = twilioSignature(authToken, `${api.origin}/api${path}`, signed);
    }
    return api.request('POST', path, { raw: params.toString(), headers });
  }
  return {
    name: 'twilio',
    config: { twilio: { accountSid, authToken, apiUrl: fake.apiUrl }, twilioAuthToken: authToken },
    refused: ['none', 'tampered'],
    ringingHangUp: 'canceled',
    // Apart from the fake's own (CA0…): the caller's side of inbound calls.
    callSid: () => `CAf${(++sids).toString(16).padStart(31, '0')}`,
    inbound: (api, call, signing = 'good') => post(api, '/telephony/twilio/inbound', { To: call.to, From: call.from, CallSid: call.carrierCallId, AccountSid: accountSid, Direction: 'inbound', CallStatus: 'ringing' }, signing),
    status(api, callId, fields, signing = 'good') {
      const form: Record<string, string> = { CallSid: fields.carrierCallId, AccountSid: accountSid };
      if (fields.status) form.CallStatus = fields.status;
      if (fields.answeredBy) form.AnsweredBy = fields.answeredBy;
      return post(api, `/telephony/twilio/status?call_id=${callId}`, form, signing);
    },
    connect(markup, call, clock) {
      const url = /<Stream url="([^"]+)"/.exec(markup)?.[1];
      const parameters = Object.fromEntries([...markup.matchAll(/<Parameter name="([^"]+)" value="([^"]+)"\/>/g)].map(([, name, value]) => [unescapeXml(name!), unescapeXml(value!)]));
      if (!url || !parameters.call_id || !parameters.token) throw new Error(`no stream in TwiML: ${markup}`);
      return joined(new MediaStreamPhone(unescapeXml(url), { callSid: call.carrierCallId, customParameters: parameters }), clock, Number(parameters.call_id));
    },
    placed: () =>
      fake.requests
        .filter((request) => request.sid !== undefined)
        .map((request) => ({
          carrierCallId: request.sid!,
          to: request.form.get('To')!,
          from: request.form.get('From')!,
          markup: request.form.get('Twiml')!,
          statusUrl: request.form.get('StatusCallback')!,
          amdUrl: request.form.get('MachineDetection') ? (request.form.get('AsyncAmdStatusCallback') ?? undefined) : undefined,
        })),
    updates: () =>
      fake.requests.flatMap((request) => {
        const sid = /\/Calls\/(CA[0-9a-f]+)\.json$/.exec(request.path)?.[1];
        return sid ? [{ carrierCallId: sid, dial: dialOf(request.form.get('Twiml')), status: request.form.get('Status') ?? undefined }] : [];
      }),
  };
}

export async function telnyxRig(t: Test): Promise<CarrierRig> {
  const fake = await startFakeTelnyx(t);
  async function post(api: TestPlatform, path: string, fields: Record<string, string>, signing: Signing): Promise<ApiResult> {
    const body = new URLSearchParams(fields).toString();
    const headers =
      signing === 'none' ? { 'content-type': FORM }
      : signing === 'tampered' ? fake.signed(`${body}&CallSid=other`)
      : signing === 'stale' ? fake.signed(body, Date.now() - 6 * 60_000)
      : fake.signed(body);
    return api.request('POST', path, { raw: body, headers });
  }
  return {
    name: 'telnyx',
    config: { telnyx: { apiKey: fake.apiKey, accountSid: fake.accountSid, connectionId: fake.connectionId, apiUrl: fake.apiUrl }, telnyxPublicKey: fake.publicKey },
    refused: ['none', 'tampered', 'stale'],
    ringingHangUp: 'completed',
    callSid: telnyxCallSid,
    inbound: (api, call, signing = 'good') =>
      post(api, '/telephony/telnyx/inbound', { AccountSid: fake.accountSid, CallSid: call.carrierCallId, CallSidLegacy: call.carrierCallId, CallStatus: 'ringing', ConnectionId: fake.connectionId, Direction: 'inbound', From: call.from, To: call.to }, signing),
    status(api, callId, fields, signing = 'good') {
      const form: Record<string, string> = { AccountSid: fake.accountSid, CallSid: fields.carrierCallId, CallSidLegacy: fields.carrierCallId, ConnectionId: fake.connectionId };
      if (fields.status) Object.assign(form, { CallStatus: fields.status, CallbackSource: 'call-progress-events', Timestamp: new Date().toISOString() });
      if (fields.answeredBy) Object.assign(form, { AnsweredBy: fields.answeredBy, MachineDetectionDuration: '2500' });
      return post(api, `/telephony/telnyx/status?call_id=${callId}`, form, signing);
    },
    connect(markup, call, clock) {
      const url = texmlStream(markup);
      const callId = Number(new URL(url).searchParams.get('call_id'));
      return joined(new TelnyxPhone(url, { callControlId: call.carrierCallId, from: call.from, to: call.to }), clock, callId);
    },
    placed: () =>
      fake.requests.flatMap((request) => {
        const json = request.json as Record<string, string> | undefined;
        if (!request.callSid || !json) return [];
        return [{ carrierCallId: request.callSid, to: json.To!, from: json.From!, markup: json.Texml!, statusUrl: json.StatusCallback!, amdUrl: json.MachineDetection ? json.AsyncAmdStatusCallback : undefined }];
      }),
    updates: () =>
      fake.requests.flatMap((request) => {
        const sid = new RegExp(`^/v2/texml/Accounts/${fake.accountSid}/Calls/([^/?]+)$`).exec(request.path)?.[1];
        return sid && request.form ? [{ carrierCallId: decodeURIComponent(sid), dial: dialOf(request.form.get('Texml')), status: request.form.get('Status') ?? undefined }] : [];
      }),
  };
}

/** The carriers the call tests run over. */
export const CARRIER_RIGS: ReadonlyArray<{ readonly name: CarrierRig['name']; start(t: Test): Promise<CarrierRig> }> = [
  { name: 'twilio', start: twilioRig },
  { name: 'telnyx', start: telnyxRig },
];
