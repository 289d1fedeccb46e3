import { randomUUID } from 'node:crypto';
import type { Test } from 'tap';
import { twilioSignature } from '../../api/routes/carriers/twilio.js';
import { MediaStreamPhone } from '../../runtime/calls/carriers/loopback.js';
import type { ManualClock } from '../../runtime/clock.js';
import type { Config } from '../../runtime/config.js';
import { bareNumber } from '../../runtime/calls/carriers/rest.js';
import { plivoDial, plivoStream, PlivoPhone, startFakePlivo } from '../fakes/plivo.js';
import { startFakeTelnyx, telnyxCallSid, texmlStream, TelnyxPhone } from '../fakes/telnyx.js';
import { startFakeTwilio } from '../fakes/twilio.js';
import { startFakeVonage, vonageUuid, VonagePhone } from '../fakes/vonage.js';
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
  /**
   * The carrier's markup run once the callee answers (it connects the media stream), or where the
   * carrier fetches it then (Plivo's answer URL).
   */
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
  readonly name: 'twilio' | 'telnyx' | 'vonage' | 'plivo';
  /** The carrier's credentials at its fake, webhook signatures required. */
  readonly config: Partial<Config>;
  /** The signings a webhook is refused for (403). */
  readonly refused: readonly Signing[];
  /** The status a call given up while ringing is set to. */
  readonly ringingHangUp: string;
  /** The content type of the carrier's markup (TwiML and its dialects are XML, Vonage's NCCO JSON). */
  readonly markupType: RegExp;
  /** A new call id as the carrier writes them. */
  callSid(): string;
  /** The carrier's voice webhook for a call from `from` to `to`. */
  inbound(api: TestPlatform, call: { to: string; from: string; carrierCallId: string }, signing?: Signing): Promise<ApiResult>;
  /**
   * A status callback for the platform's call `callId`: its status, answering-machine verdict, both
   * or neither, in TwiML's words (`in-progress`, `machine_end_beep`), which a carrier with words of
   * its own (Vonage) sends in those.
   */
  status(api: TestPlatform, callId: number, fields: { carrierCallId: string; status?: string; answeredBy?: string }, signing?: Signing): Promise<ApiResult>;
  /** The carrier's phone joins the stream the markup names; resolves once the platform has taken it. */
  connect(markup: string, call: { carrierCallId: string; from: string; to: string }, clock: ManualClock): Promise<{ phone: SimulatedPhone; callId: number }>;
  /** The calls the platform placed, in order. */
  placed(): PlacedCall[];
  /** The changes to live calls it asked for, in order. */
  updates(): CallUpdate[];
  /** Resolves once `holds()` is true, looked at as the carrier answers each request the platform makes. */
  answered(holds: () => boolean): Promise<void>;
}

const FORM = 'application/x-www-form-urlencoded';
const unescapeXml = (text: string) => text.replace(/&quot;/g, '"').replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
/** The number markup dials, bare (TwiML) or as a `<Number>` noun (TeXML). */
const dialOf = (markup: string | null | undefined) => (markup ? /<Dial>(?:<Number>)?([^<]+)(?:<\/Number>)?<\/Dial>/.exec(markup)?.[1] : undefined);

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
    markupType: /^text\/xml/,
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
    answered: (holds) => fake.answered(holds),
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
    markupType: /^text\/xml/,
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
    answered: (holds) => fake.answered(holds),
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

/** Vonage's status words for the table's TwiML ones. */
const VONAGE_STATUSES: Readonly<Record<string, string>> = { 'in-progress': 'answered', 'no-answer': 'timeout', canceled: 'cancelled' };

export async function vonageRig(t: Test): Promise<CarrierRig> {
  const fake = await startFakeVonage(t);
  /** Signed as Vonage signs: over the payload (a GET's query fields as JSON), now, too long ago, or over another payload. */
  function authorization(payload: string, signing: Signing): Record<string, string> {
    if (signing === 'none') return {};
    const signed = signing === 'tampered' ? fake.signed(payload.replace(/"uuid":"/, '"uuid":"x')) : fake.signed(payload, signing === 'stale' ? Date.now() - 6 * 60_000 : undefined);
    return { authorization: signed };
  }
  return {
    name: 'vonage',
    config: { vonage: { applicationId: fake.applicationId, privateKey: fake.privateKey, apiUrl: fake.apiUrl }, vonageSignatureSecret: fake.signatureSecret },
    refused: ['none', 'tampered', 'stale'],
    ringingHangUp: 'hangup',
    markupType: /^application\/json/,
    callSid: vonageUuid,
    // The answer URL as Vonage calls it by default: a GET with the call in the query string.
    inbound(api, call, signing = 'good') {
      const query = { to: bareNumber(call.to), from: bareNumber(call.from), endpoint_type: 'phone', uuid: call.carrierCallId, conversation_uuid: `CON-${call.carrierCallId}` };
      return api.request('GET', `/telephony/vonage/inbound?${new URLSearchParams(query)}`, { headers: authorization(JSON.stringify(query), signing) });
    },
    status(api, callId, fields, signing = 'good') {
      const event: Record<string, string> = { uuid: fields.carrierCallId, conversation_uuid: `CON-${fields.carrierCallId}`, direction: 'outbound', timestamp: new Date().toISOString() };
      // A machine-detection verdict is an event of its own, its `status` the verdict.
      if (fields.answeredBy) Object.assign(event, /^machine|^fax/.test(fields.answeredBy) ? { status: 'machine', sub_state: 'beep_start' } : { status: fields.answeredBy });
      else if (fields.status) event.status = VONAGE_STATUSES[fields.status] ?? fields.status;
      const body = JSON.stringify(event);
      return api.request('POST', `/telephony/vonage/status?call_id=${callId}`, { raw: body, headers: { 'content-type': 'application/json', ...authorization(body, signing) } });
    },
    connect(markup, _call, clock) {
      const endpoint = (JSON.parse(markup) as Array<{ action: string; endpoint?: Array<{ type: string; uri: string; 'content-type': string; headers: Record<string, string> }> }>)
        .find((action) => action.action === 'connect')?.endpoint?.find((e) => e.type === 'websocket');
      if (!endpoint || endpoint['content-type'] !== 'audio/l16;rate=16000') throw new Error(`no 16 kHz websocket in the NCCO: ${markup}`);
      return joined(new VonagePhone(endpoint.uri, endpoint.headers), clock, Number(endpoint.headers.call_id));
    },
    answered: (holds) => fake.answered(holds),
    placed: () =>
      fake.requests.flatMap((request) => {
        const json = request.json as { to: Array<{ number: string }>; from: { number: string }; ncco: unknown; event_url: string[]; advanced_machine_detection?: unknown } | undefined;
        if (!request.uuid || !json) return [];
        return [{ carrierCallId: request.uuid, to: `+${json.to[0]!.number}`, from: `+${json.from.number}`, markup: JSON.stringify(json.ncco), statusUrl: json.event_url[0]!, amdUrl: json.advanced_machine_detection ? json.event_url[0] : undefined }];
      }),
    updates: () =>
      fake.requests.flatMap((request) => {
        const uuid = /^\/v1\/calls\/([\w-]+)$/.exec(request.path)?.[1];
        if (request.method !== 'PUT' || !uuid || !request.json) return [];
        const dialled = (request.json.destination as { ncco?: Array<{ endpoint?: Array<{ number?: string }> }> } | undefined)?.ncco?.[0]?.endpoint?.[0]?.number;
        return [{ carrierCallId: uuid, dial: dialled && `+${dialled}`, status: request.json.action === 'hangup' ? 'hangup' : undefined }];
      }),
  };
}

/**
 * Plivo: numbers in its webhooks and Call API are E.164 digits without the `+`; a placed call's
 * XML is fetched from its answer URL when the callee answers, and a transfer's from its
 * `aleg_url` (the fake does so before acknowledging the transfer); a hang-up is a DELETE.
 */
export async function plivoRig(t: Test): Promise<CarrierRig> {
  const fake = await startFakePlivo(t);
  const digits = (e164: string) => e164.replace(/^\+/, '');
  const calls = new Map<string, { from: string; to: string; direction: 'inbound' | 'outbound' }>();
  async function post(api: TestPlatform, path: string, fields: Record<string, string>, signing: Signing): Promise<ApiResult> {
    const params = new URLSearchParams(fields);
    const headers =
      signing === 'none' ? { 'content-type': FORM }
      : signing === 'tampered' ? fake.signed(`${api.origin}/api${path}`, params, new URLSearchParams({ ...fields, CallUUID: 'another-call' }))
      : fake.signed(`${api.origin}/api${path}`, params);
    return api.request('POST', path, { raw: params.toString(), headers });
  }
  return {
    name: 'plivo',
    config: { plivo: { authId: fake.authId, authToken: fake.authToken, apiUrl: fake.apiUrl }, plivoAuthToken: fake.authToken },
    // V3 signatures carry a nonce, no timestamp: nothing to be stale.
    refused: ['none', 'tampered'],
    ringingHangUp: 'hangup',
    markupType: /^text\/xml/,
    callSid: () => randomUUID(),
    inbound(api, call, signing = 'good') {
      calls.set(call.carrierCallId, { from: call.from, to: call.to, direction: 'inbound' });
      return post(api, '/telephony/plivo/inbound', { CallUUID: call.carrierCallId, From: digits(call.from), To: digits(call.to), Direction: 'inbound', CallStatus: 'ringing', Event: 'StartApp', CallerName: '' }, signing);
    },
    status(api, callId, fields, signing = 'good') {
      const call = calls.get(fields.carrierCallId);
      const form: Record<string, string> = { CallUUID: fields.carrierCallId, Direction: call?.direction ?? 'outbound', From: digits(call?.from ?? ''), To: digits(call?.to ?? '') };
      if (fields.status) Object.assign(form, { CallStatus: fields.status, Event: fields.status === 'ringing' ? 'Ring' : 'Hangup' });
      if (fields.status === 'completed' || fields.status === 'busy') Object.assign(form, { HangupCause: fields.status === 'busy' ? 'USER_BUSY' : 'NORMAL_CLEARING', Duration: '12', BillDuration: '60' });
      // The table speaks TwiML's `AnsweredBy` words; Plivo's verdict is `Machine`, true or false.
      if (fields.answeredBy) Object.assign(form, { Event: 'MachineDetection', Machine: String(/^machine|^fax/.test(fields.answeredBy)), CallStatus: 'in-progress', RequestUUID: fields.carrierCallId });
      return post(api, `/telephony/plivo/status?call_id=${callId}`, form, signing);
    },
    async connect(markup, call, clock) {
      // A placed call's markup is its answer URL: Plivo fetches the XML there once the callee answers.
      const xml = /^https?:/.test(markup) ? await fake.fetchXml(markup, { CallUUID: call.carrierCallId, RequestUUID: call.carrierCallId, From: digits(call.from), To: digits(call.to), Direction: 'outbound', CallStatus: 'in-progress', Event: 'StartApp' }) : markup;
      const { url } = plivoStream(xml);
      const callId = Number(new URL(url).searchParams.get('call_id'));
      return joined(new PlivoPhone(url, { callUuid: call.carrierCallId }), clock, callId);
    },
    answered: (holds) => fake.answered(holds),
    placed: () =>
      fake.requests.flatMap((request) => {
        const json = request.json as Record<string, string> | undefined;
        if (!request.requestUuid || !json) return [];
        calls.set(request.requestUuid, { from: `+${json.from}`, to: `+${json.to}`, direction: 'outbound' });
        return [{ carrierCallId: request.requestUuid, to: `+${json.to}`, from: `+${json.from}`, markup: json.answer_url!, statusUrl: json.hangup_url!, amdUrl: json.machine_detection ? json.machine_detection_url : undefined }];
      }),
    updates: () =>
      fake.requests.flatMap((request): CallUpdate[] => {
        const uuid = new RegExp(`^/v1/Account/${fake.authId}/Call/([^/]+)/$`).exec(request.path)?.[1];
        if (!uuid) return [];
        return request.method === 'DELETE' ? [{ carrierCallId: uuid, status: 'hangup' }] : [{ carrierCallId: uuid, dial: plivoDial(request.transferXml) }];
      }),
  };
}

/** The carriers the call tests run over. */
export const CARRIER_RIGS: ReadonlyArray<{ readonly name: CarrierRig['name']; start(t: Test): Promise<CarrierRig> }> = [
  { name: 'twilio', start: twilioRig },
  { name: 'telnyx', start: telnyxRig },
  { name: 'vonage', start: vonageRig },
  { name: 'plivo', start: plivoRig },
];
