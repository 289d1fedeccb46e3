/**
 * Carrier webhooks are public routes: anyone can post to them. Unsigned, on a server with no
 * carrier's signing secret set and no choice to take them unsigned (the defaults of `npm start`):
 * 1. every carrier's answer and status webhooks are refused 403 in the spec's error shape, saying
 *    only that this server does not take them;
 * 2. none of them starts a call to the owner's number, reveals a media stream token or ends a call.
 */
import t from 'tap';
import { startTestPlatform } from './helpers/platform.js';

t.test('unsigned carrier webhooks are refused on the defaults', async (t) => {
  const api = await startTestPlatform(t);
  const owner = await api.user('Owner');
  await api.credit(owner.id, 100);
  const number = await api.phoneNumber(owner.token);
  await api.assistant(owner.token, { type: 'inbound', phone_number_id: number.id });
  const digits = number.number.slice(1);
  const form = (fields: Record<string, string>) => ({ raw: new URLSearchParams(fields).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const webhooks: Array<[string, string, string, { raw?: string; body?: unknown; headers?: Record<string, string> }]> = [
    ['Twilio', 'POST', '/telephony/twilio/inbound', form({ To: number.number, From: '+14155550199', CallSid: `CA${'0'.repeat(32)}` })],
    ['Twilio', 'POST', '/telephony/twilio/status?call_id=1', form({ CallSid: `CA${'0'.repeat(32)}`, CallStatus: 'completed' })],
    ['Telnyx', 'POST', '/telephony/telnyx/inbound', form({ To: number.number, From: '+14155550199', CallSid: 'v3:0000-telnyx' })],
    ['Telnyx', 'POST', '/telephony/telnyx/status?call_id=1', form({ CallSid: 'v3:0000-telnyx', CallStatus: 'completed' })],
    ['Plivo', 'POST', '/telephony/plivo/inbound', form({ To: digits, From: '14155550199', CallUUID: '00000000-0000-4000-8000-000000000000' })],
    ['Plivo', 'POST', '/telephony/plivo/status?call_id=1', form({ CallUUID: '00000000-0000-4000-8000-000000000000', CallStatus: 'completed' })],
    ['Plivo', 'POST', '/telephony/plivo/answer?call_id=1&token=x', form({ CallUUID: '00000000-0000-4000-8000-000000000000' })],
    ['Vonage', 'POST', '/telephony/vonage/inbound', { body: { to: digits, from: '14155550199', uuid: '00000000-vonage' } }],
    ['Vonage', 'GET', `/telephony/vonage/inbound?to=${digits}&from=14155550199&uuid=00000000-vonage`, {}],
    ['Vonage', 'POST', '/telephony/vonage/status?call_id=1', { body: { uuid: '00000000-vonage', status: 'completed' } }],
  ];
  for (const [title, method, path, options] of webhooks) {
    const response = await api.request(method, path, options);
    t.equal(response.status, 403, `${method} ${path}`);
    t.same(response.body, { message: `${title} webhooks are not accepted by this server.` }, `${method} ${path}: nothing more said`);
  }
  const calls = await api.request('GET', '/user/calls', { token: owner.token });
  t.same(calls.body.data, [], 'no call was started');
});
