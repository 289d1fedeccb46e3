import t, { type Test } from 'tap';
import { checkExtraction } from '../runtime/calls/evaluation.js';
import { startFakeOpenAi } from './fakes/openai.js';
import { withClient } from './helpers/database.js';
import { callIn, endedCall, voiceSetup } from './helpers/voice.js';

/**
 * Post-call evaluation: the model extracts each field of post_call_schema from the transcript in
 * JSON mode; values are type-checked; failures are stored as such; the webhook carries the result.
 */

const schema = [
  { name: 'customer_name', type: 'string', description: 'Name of the caller' },
  { name: 'budget', type: 'number', description: 'Budget in dollars' },
  { name: 'interested', type: 'bool', description: 'Whether they want a demo' },
];

t.test('type checks of an extraction', async (t) => {
  const fields = schema as Parameters<typeof checkExtraction>[0];
  t.same(checkExtraction(fields, '{"customer_name":"Ada","budget":"5000","interested":"true"}'), { evaluation: { customer_name: 'Ada', budget: 5000, interested: true }, ok: true });
  t.same(checkExtraction(fields, '```json\n{"customer_name":null,"budget":"lots"}\n```'), { evaluation: { customer_name: null, budget: null, interested: null, _errors: { budget: 'expected a number, got "lots"' } }, ok: true });
  t.same(checkExtraction(fields, '[1,2]'), { evaluation: { _error: 'The model did not answer with a JSON object.', _reply: '[1,2]' }, ok: false });
  t.same(checkExtraction(fields, 'sorry'), { evaluation: { _error: 'The model did not answer with JSON.', _reply: 'sorry' }, ok: false });
  t.same(checkExtraction(fields, '```\n{"customer_name":"Bo"}```'), { evaluation: { customer_name: 'Bo', budget: null, interested: null }, ok: true }, 'a fence without a language');
  // A million spaces between two keys: once a quadratic regular expression (minutes), now one pass.
  t.same(checkExtraction(fields, `{"customer_name":"Ada",${' '.repeat(1_000_000)}"budget":5}`).evaluation, { customer_name: 'Ada', budget: 5, interested: null });
});

async function evaluatedCall(t: Test, evaluationReply: string) {
  const fake = await startFakeOpenAi(t);
  const s = await voiceSetup(t, { post_call_schema: schema, is_webhook_active: true, webhook_url: 'http://127.0.0.1:9/hook' }, { config: { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'sk-test' } }, outboundAllowPrivate: true } });
  fake.scriptChat({ text: 'Noted, thank you.' }, { text: evaluationReply });
  const { phone, callId } = await callIn(s, ['I am Ada, my budget is 5000 and yes I want a demo.']);
  await phone.untilAgentDone();
  await phone.turn(1_000);
  phone.phone.hangUp();
  await endedCall(s, callId);
  await s.api.platform.runtime.services.evaluator.settled(callId);
  const call = (await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data;
  const delivery = await withClient(s.api.databaseUrl, async (db) => (await db.query("SELECT body, (attempts > 0 OR next_attempt_at <= now()) AS due FROM webhook_deliveries WHERE call_id = $1", [callId])).rows[0]);
  return { fake, call, payload: JSON.parse(delivery.body), due: delivery.due as boolean };
}

t.test('the model fills the schema in JSON mode; the webhook waits for it and carries it', async (t) => {
  const { fake, call, payload, due } = await evaluatedCall(t, '{"customer_name":"Ada","budget":5000,"interested":true}');
  const request = fake.requests.filter((r) => r.path.includes('chat'))[1]!.body;
  t.same(request.response_format, { type: 'json_object' });
  t.match(request.messages[0].content, /"name":"customer_name","type":"string"/);
  t.equal(request.messages[1].content, call.transcript);
  t.same(call.evaluation, { customer_name: 'Ada', budget: 5000, interested: true });
  t.same(payload.extracted_variables, call.evaluation);
  t.ok(due, 'the held delivery was released (attempted or due)');
});

t.test('an extraction that fails is stored as a failure and still delivered', async (t) => {
  const { call, payload, due } = await evaluatedCall(t, 'I cannot do that.');
  t.same(call.evaluation, { _error: 'The model did not answer with JSON.', _reply: 'I cannot do that.' });
  t.same(payload.extracted_variables, call.evaluation);
  t.ok(due);
});

/** A call with the dev model whose caller says one sentence, ended and evaluated. */
async function devEvaluatedCall(t: Test) {
  const s = await voiceSetup(t, { llm_model_id: 6, post_call_schema: schema });
  const { phone, callId } = await callIn(s, ['My budget is 300, yes please.']);
  await phone.untilAgentDone();
  await phone.turn(1_000);
  phone.phone.hangUp();
  await endedCall(s, callId);
  await s.api.platform.runtime.services.evaluator.settled(callId);
  return { s, callId };
}

t.test('with the dev model, without a fake: the fields come from the caller words', async (t) => {
  const { s, callId } = await devEvaluatedCall(t);
  const call = (await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data;
  t.same(call.evaluation, { customer_name: 'My budget is 300, yes please.', budget: 300, interested: true });
});

t.test('an evaluation still pending after its lease ran out (its result could not be saved) is taken up again while the process runs', async (t) => {
  const { s, callId } = await devEvaluatedCall(t);
  const evaluator = s.api.platform.runtime.services.evaluator;
  // As if saving the result had failed: pending, its lease still running...
  await withClient(s.api.databaseUrl, (db) =>
    db.query(`UPDATE calls SET evaluation_status = 'pending', evaluation = NULL, evaluation_lease_expires_at = now() + interval '1 minute' WHERE id = $1`, [callId]),
  );
  t.equal(await evaluator.sweep(), 0, 'under a live lease it may be under way elsewhere: left alone');
  // ...and run out.
  await withClient(s.api.databaseUrl, (db) => db.query(`UPDATE calls SET evaluation_lease_expires_at = now() - interval '1 second' WHERE id = $1`, [callId]));
  const [mine, theirs] = await Promise.all([evaluator.sweep(), evaluator.sweep()]);
  t.same([mine, theirs].sort(), [0, 1], 'two sweeps at once (as two processes): one takes it');
  const call = (await s.api.request('GET', `/user/calls/${callId}`, { token: s.token })).body.data;
  t.same(call.evaluation, { customer_name: 'My budget is 300, yes please.', budget: 300, interested: true });
});
