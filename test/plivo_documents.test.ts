import t from 'tap';
import { plivoDial, plivoStream, startFakePlivo } from './fakes/plivo.js';
import { startTestPlatform } from './helpers/platform.js';

/**
 * What only Plivo asks of the platform (its calls run in calls_carriers.test.ts): the documents it
 * fetches by URL, and the callbacks that carry no call's status.
 * 1. A placed call's answer URL, signed, answers `<Stream>` naming the call's id, its token and its
 *    status URL; unsigned or signed over another body it is refused (403).
 * 2. An answer URL the platform did not write (no call id, a token it never makes) is answered
 *    with a hang-up.
 * 3. A transfer's document dials the number (digits, as Plivo writes them); anything but an
 *    E.164 number hangs up; unsigned it is refused.
 * 4. The stream's own status events and an application's hang-up callback without a call id are
 *    taken and acknowledged with an empty document.
 */

t.test('the documents Plivo fetches', async (t) => {
  const fake = await startFakePlivo(t);
  const api = await startTestPlatform(t, { plivo: { authId: fake.authId, authToken: fake.authToken, apiUrl: fake.apiUrl }, plivoAuthToken: fake.authToken });
  const call = { CallUUID: 'c7a4d6a2-1111-4a5b-9c1d-2e3f4a5b6c7d', From: '14155550123', To: '4915112345678', Direction: 'outbound', CallStatus: 'in-progress' };
  const post = (url: string, fields: Record<string, string>, signing: 'good' | 'none' | 'tampered' = 'good') => {
    const params = new URLSearchParams(fields);
    const headers = signing === 'none' ? { 'content-type': 'application/x-www-form-urlencoded' } : fake.signed(url, params, signing === 'tampered' ? new URLSearchParams({ ...fields, To: '1' }) : params);
    return fetch(url, { method: 'POST', headers, body: params.toString() });
  };

  await t.test("a placed call's answer URL", async (t) => {
    const url = `${api.origin}/api/telephony/plivo/answer?call_id=42&token=AbC-d_9`;
    const xml = await fake.fetchXml(url, call);
    t.same(plivoStream(xml), { url: `${api.origin.replace(/^http/, 'ws')}/ws/telephony/plivo?call_id=42&token=AbC-d_9`, statusCallbackUrl: `${api.origin}/api/telephony/plivo/status?call_id=42` });
    for (const signing of ['none', 'tampered'] as const) {
      const refused = await post(url, call, signing);
      t.same([refused.status, await refused.json()], [403, { message: 'The Plivo signature does not match.' }], signing);
    }
  });

  await t.test('an answer URL the platform did not write hangs up', async (t) => {
    for (const query of ['token=abc', 'call_id=42', 'call_id=42&token=a%20b', 'call_id=x&token=abc']) {
      t.equal(await fake.fetchXml(`${api.origin}/api/telephony/plivo/answer?${query}`, call), '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>', query);
    }
  });

  await t.test("a transfer's document", async (t) => {
    const url = (number: string) => `${api.origin}/api/telephony/plivo/dial?${new URLSearchParams({ number })}`;
    const xml = await fake.fetchXml(url('+14155550123'), call);
    t.match(xml, /<Dial><Number>14155550123<\/Number><\/Dial>/);
    t.equal(plivoDial(xml), '+14155550123');
    for (const number of ['14155550123', '+1', 'sip:someone@example.com', '']) t.notOk(plivoDial(await fake.fetchXml(url(number), call)), `not dialled: "${number}"`);
    t.equal((await post(url('+14155550123'), call, 'none')).status, 403);
  });

  await t.test('callbacks that carry no call status', async (t) => {
    const stream = await fake.fetchXml(`${api.origin}/api/telephony/plivo/status?call_id=42`, { CallUUID: call.CallUUID, StreamID: '87654321-4321-4321-4321-cba987654321', Event: 'StartStream', Timestamp: '2026-01-01 00:00:00' });
    t.equal(stream, '<?xml version="1.0" encoding="UTF-8"?><Response/>');
    const hangup = await fake.fetchXml(`${api.origin}/api/telephony/plivo/status`, { ...call, CallStatus: 'completed', HangupCause: 'NORMAL_CLEARING', Direction: 'inbound' });
    t.equal(hangup, '<?xml version="1.0" encoding="UTF-8"?><Response/>');
  });
});
