/**
 * Phone numbers (spec 2.7, 4.4, 4.5):
 * 1. search: US by default, every supported country, a digit filter, empty data when nothing
 *    matches, 422 for other countries and for non-digit or too-long filters.
 * 2. purchase debits the first month through the ledger, removes the number from the inventory and
 *    returns the owned number; 402 without balance (nothing changes); 422 for an unknown number.
 * 3. caller ID registration; list-all and the legacy list (SMS-capable with subscription only).
 * 4. release: 404 for another user's number, 422 while an assistant uses it.
 * 5. assistant phone numbers: a plain array; inbound leaves out caller IDs and taken numbers.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const alice = await api.user('Alice');
const bob = await api.user('Bob');

t.test('search', async (t) => {
  const us = await api.request('GET', '/user/phone-numbers/search', { token: alice.token });
  t.equal(us.status, 200);
  t.ok(us.body.data.length > 0);
  t.same(Object.keys(us.body.data[0]).sort(), ['address_requirements', 'billing_price_id', 'country_code', 'phone_number', 'phone_number_formatted', 'price', 'sms_capable']);
  t.ok(us.body.data.every((n: { country_code: string; phone_number: string }) => n.country_code === 'US' && /^\+1\d{10}$/.test(n.phone_number)));
  for (const country of ['US', 'CA', 'GB', 'AU', 'IL', 'PL', 'FI', 'NL', 'DK', 'IT']) {
    const res = await api.request('GET', `/user/phone-numbers/search?country_code=${country}`, { token: alice.token });
    t.ok(res.body.data.length > 0 && res.body.data.every((n: { country_code: string; phone_number: string }) => n.country_code === country && /^\+\d{8,15}$/.test(n.phone_number)), country);
  }
  const sf = await api.request('GET', '/user/phone-numbers/search?country_code=US&contains=415', { token: alice.token });
  t.ok(sf.body.data.length > 0 && sf.body.data.every((n: { phone_number: string }) => n.phone_number.includes('415')));
  const none = await api.request('GET', '/user/phone-numbers/search?country_code=US&contains=9999999999', { token: alice.token });
  t.same(none.body, { data: [] });
  const blank = await api.request('GET', '/user/phone-numbers/search?country_code=&contains=', { token: alice.token });
  t.equal(blank.status, 200, 'blank parameters are parameters not given');
  t.ok(blank.body.data.length > 0 && blank.body.data.every((n: { country_code: string }) => n.country_code === 'US'), 'the default country');

  const de = await api.request('GET', '/user/phone-numbers/search?country_code=DE', { token: alice.token });
  t.same([de.status, de.body.errors], [422, { country_code: ['The selected country code is invalid.'] }]);
  const letters = await api.request('GET', '/user/phone-numbers/search?contains=41a', { token: alice.token });
  t.same([letters.status, letters.body.errors], [422, { contains: ['The contains may only contain digits.'] }]);
  const long = await api.request('GET', '/user/phone-numbers/search?contains=12345678901', { token: alice.token });
  t.same(long.body.errors, { contains: ['The contains may not be greater than 10 characters.'] });
});

t.test('purchase through the ledger', async (t) => {
  const [offer] = (await api.request('GET', '/user/phone-numbers/search?country_code=GB', { token: alice.token })).body.data;
  const broke = await api.request('POST', '/user/phone-numbers/purchase', { token: alice.token, body: { phone_number: offer.phone_number } });
  t.same([broke.status, broke.body], [402, { message: 'Insufficient balance. Please top up your account.' }]);
  const still = await api.request('GET', `/user/phone-numbers/search?country_code=GB`, { token: alice.token });
  t.ok(still.body.data.some((n: { phone_number: string }) => n.phone_number === offer.phone_number), 'still purchasable after the refusal');

  await api.credit(alice.id, 10);
  const bought = await api.request('POST', '/user/phone-numbers/purchase', { token: alice.token, body: { phone_number: offer.phone_number } });
  t.equal(bought.status, 201);
  t.match(bought.body.data, { id: Number, phone_number: offer.phone_number, country_code: 'GB', type: 'normal', type_label: 'Dedicated Number', has_active_subscription: true, region: 'London' });
  t.equal((await api.request('GET', '/user', { token: alice.token })).body.data.balance, 10 - offer.price);
  const after = await api.request('GET', `/user/phone-numbers/search?country_code=GB`, { token: alice.token });
  t.notOk(after.body.data.some((n: { phone_number: string }) => n.phone_number === offer.phone_number), 'gone from the inventory');

  await api.credit(bob.id, 10);
  const again = await api.request('POST', '/user/phone-numbers/purchase', { token: bob.token, body: { phone_number: offer.phone_number } });
  t.same([again.status, again.body.errors], [422, { phone_number: ['The selected phone number is not available.'] }]);
  const bad = await api.request('POST', '/user/phone-numbers/purchase', { token: bob.token, body: { phone_number: '555-0100' } });
  t.equal(bad.status, 422);
  t.equal((await api.request('GET', '/user', { token: bob.token })).body.data.balance, 10, 'refusals charge nothing');
  const ledger = await withClient(api.databaseUrl, async (db) => (await db.query(`SELECT amount::float AS amount FROM ledger_entries WHERE user_id = $1 AND kind = 'phone_number'`, [alice.id])).rows);
  t.same(ledger, [{ amount: -offer.price }]);
});

t.test('lists, caller ID, release and assignable numbers', async (t) => {
  const callerId = await api.request('POST', '/user/phone-numbers/caller-id', { token: alice.token, body: { phone_number: '+4930123456' } });
  t.equal(callerId.status, 201);
  t.match(callerId.body.data, { type: 'caller_id', type_label: 'Verified Caller ID', country_code: 'DE', has_active_subscription: false });
  const dup = await api.request('POST', '/user/phone-numbers/caller-id', { token: alice.token, body: { phone_number: '+4930123456' } });
  t.equal(dup.status, 422);
  t.equal((await api.request('POST', '/user/phone-numbers/caller-id', { token: alice.token, body: { phone_number: '030123456' } })).status, 422);

  const all = await api.request('GET', '/user/phone-numbers/all', { token: alice.token });
  t.equal(all.body.data.length, 2);
  t.same(Object.keys(all.body.data[0]).sort(), ['country_code', 'created_at', 'has_active_subscription', 'id', 'phone_number', 'region', 'sms_capable', 'type', 'type_label']);
  const legacy = await api.request('GET', '/user/phone-numbers', { token: alice.token });
  t.same(legacy.body, { data: [] }, 'the GB number has no SMS; the caller ID no subscription');
  t.same((await api.request('GET', '/user/phone-numbers/all', { token: bob.token })).body, { data: [] });

  const gb = all.body.data.find((n: { type: string }) => n.type === 'normal');
  const assignable = await api.request('GET', '/user/assistants/phone-numbers', { token: alice.token });
  t.ok(Array.isArray(assignable.body));
  t.same(assignable.body.map((n: { type_label: string; is_available: boolean }) => [n.type_label, n.is_available]), [['Normal', true], ['Caller ID', false]]);
  const inbound = await api.request('GET', '/user/assistants/phone-numbers?type=inbound', { token: alice.token });
  t.same(inbound.body, [{ id: gb.id, phone_number: gb.phone_number, country_code: 'GB', type_label: 'Normal', is_available: true }]);

  const foreign = await api.request('DELETE', `/user/phone-numbers/${gb.id}`, { token: bob.token });
  t.same([foreign.status, foreign.body], [404, { message: 'Phone number not found.' }]);

  await withClient(api.databaseUrl, (db) =>
    db.query(`INSERT INTO assistants (user_id, name, type, mode, voice_id, language_id, timezone, initial_message, system_prompt, knowledgebase_mode, llm_model_id, phone_number_id)
              VALUES ($1, 'Front desk', 'inbound', 'pipeline', 1, 1, 'UTC', 'Hi', 'Be nice', 'function_call', 1, $2)`, [alice.id, gb.id]),
  );
  t.same((await api.request('GET', '/user/assistants/phone-numbers?type=inbound', { token: alice.token })).body, [], 'taken numbers left out');
  const busy = await api.request('DELETE', `/user/phone-numbers/${gb.id}`, { token: alice.token });
  t.equal(busy.status, 422);
  t.match(busy.body.errors.phone_number[0], /used by an assistant/);

  const released = await api.request('DELETE', `/user/phone-numbers/${callerId.body.data.id}`, { token: alice.token });
  t.same([released.status, released.body], [200, { message: 'Phone number released successfully.' }]);

  for (const phone_number of [gb.phone_number, (await api.request('GET', '/user/phone-numbers/search?country_code=US', { token: bob.token })).body.data[0].phone_number]) {
    const taken = await api.request('POST', '/user/phone-numbers/caller-id', { token: bob.token, body: { phone_number } });
    t.same([taken.status, taken.body.errors], [422, { phone_number: ['The phone number is offered by the platform: rent it to call from it.'] }], `${phone_number}: rented or offered, not anyone's caller ID`);
  }
});

t.test('a released number is offered again', async (t) => {
  const carol = await api.user('Carol');
  await api.credit(carol.id, 10);
  const [offer] = (await api.request('GET', '/user/phone-numbers/search?country_code=FI', { token: carol.token })).body.data;
  const bought = await api.request('POST', '/user/phone-numbers/purchase', { token: carol.token, body: { phone_number: offer.phone_number } });
  t.equal((await api.request('DELETE', `/user/phone-numbers/${bought.body.data.id}`, { token: carol.token })).status, 200);
  const offered = (await api.request('GET', '/user/phone-numbers/search?country_code=FI', { token: carol.token })).body.data;
  t.ok(offered.some((n: { phone_number: string }) => n.phone_number === offer.phone_number), 'back in the search');
  await api.credit(bob.id, 10);
  t.equal((await api.request('POST', '/user/phone-numbers/purchase', { token: bob.token, body: { phone_number: offer.phone_number } })).status, 201, 'and rented by someone else');
});
