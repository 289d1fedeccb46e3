import type { Test } from 'tap';
import { serveFake } from './http.js';
import { Conditions } from '../helpers/conditions.js';

/**
 * A local stand-in for Twilio's Programmable Voice REST API (2010-04-01): create a call
 * (`POST /Accounts/{sid}/Calls.json`) and update one (`POST /Accounts/{sid}/Calls/{CallSid}.json`),
 * form-encoded with HTTP basic auth, answering JSON as Twilio does.
 */
export interface FakeTwilio {
  readonly apiUrl: string;
  /** `sid`: the call a create made. */
  readonly requests: Array<{ path: string; authorization: string | undefined; form: URLSearchParams; sid?: string }>;
  /** Resolves once `holds()` is true, looked at as each request is answered (its record complete). */
  answered(holds: () => boolean): Promise<void>;
  /** Resolves once `count` requests have been answered (counting from the fake's start). */
  received(count: number): Promise<void>;
  /** Answer the next create with this status (e.g. 400 for an unreachable number). */
  failNext(status: number): void;
}

export async function startFakeTwilio(t: Test, accountSid: string, authToken: string): Promise<FakeTwilio> {
  const requests: FakeTwilio['requests'] = [];
  const arrivals = new Conditions();
  let failure: number | undefined;
  let calls = 0;
  const origin = await serveFake(t, (req, res, raw) => {
    const form = new URLSearchParams(raw);
    const request: FakeTwilio['requests'][number] = { path: req.url ?? '', authorization: req.headers.authorization, form };
    requests.push(request);
    const send = (status: number, body: unknown) => {
      arrivals.changed();
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString('base64')}`) return send(401, { code: 20003, message: 'Authenticate', status: 401 });
    const create = new RegExp(`^/2010-04-01/Accounts/${accountSid}/Calls\\.json$`);
    const update = new RegExp(`^/2010-04-01/Accounts/${accountSid}/Calls/(CA[0-9a-f]+)\\.json$`);
    if (create.test(req.url ?? '')) {
      if (failure !== undefined) {
        const status = failure;
        failure = undefined;
        return send(status, { code: 21217, message: 'Phone number is not a valid phone number', status });
      }
      const sid = `CA${(++calls).toString(16).padStart(32, '0')}`;
      request.sid = sid;
      return send(201, { sid, status: 'queued', to: form.get('To'), from: form.get('From'), account_sid: accountSid });
    }
    const match = update.exec(req.url ?? '');
    if (match) return send(200, { sid: match[1], status: form.get('Status') ?? 'in-progress' });
    send(404, { code: 20404, message: 'The requested resource was not found', status: 404 });
  });
  return {
    apiUrl: origin,
    requests,
    answered: (holds) => arrivals.until(holds),
    received: (count) => arrivals.until(() => requests.length >= count),
    failNext(status) {
      failure = status;
    },
  };
}
