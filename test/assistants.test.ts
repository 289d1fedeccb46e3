/**
 * Assistants (spec 2.5, 2.6, 4.4, section 7):
 * 1. create with the required fields: 201 {id, uuid, name, status inactive, type, mode} (the uuid
 *    is the one conversations, web calls and the widget take); GET shows every
 *    default of 2.5, a uuid, auto-selected providers and timestamps.
 * 2. validation: required fields, ranges with Laravel wording ("speech speed must be between 0.7 and 1.2").
 * 3. rules 1-7 on create and on update: models per mode, voice/mode compatibility, function_call and
 *    interruptions in multimodal/dualplex, fillers pipeline-only, inbound number rules, webhook URL,
 *    ownership of tools, knowledgebase and number.
 * 4. update: partial, null clears nullable fields, arrays and variables replace, a mode change resets
 *    mode-specific settings; 404 "Assistant not found" before any 422; the answer carries the uuid.
 * 5. built-in tools; delete; enable/disable webhook; another user's assistant is 404 everywhere.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const alice = await api.user('Alice');
const bob = await api.user('Bob');

const base = {
  name: 'Front desk',
  voice_id: 1,
  language_id: 1,
  type: 'outbound',
  mode: 'pipeline',
  timezone: 'Europe/Berlin',
  initial_message: 'Hello {{name}}, how can I help?',
  system_prompt: 'You are a helpful receptionist.',
  llm_model_id: 1,
};

const create = (body: Record<string, unknown>, token = alice.token) => api.request('POST', '/user/assistant', { token, body });
const update = (id: number, body: Record<string, unknown>, token = alice.token) => api.request('PUT', `/user/assistant/${id}`, { token, body });
const read = async (id: number) => (await api.request('GET', `/user/assistant/${id}`, { token: alice.token })).body.data;

async function ownedNumber(userId: number, phone: string, type = 'normal'): Promise<number> {
  return withClient(api.databaseUrl, async (db) => (await db.query(`INSERT INTO phone_numbers (user_id, phone_number, country_code, type) VALUES ($1, $2, 'US', $3) RETURNING id`, [userId, phone, type])).rows[0].id);
}

t.test('create and read back every default', async (t) => {
  const res = await create(base);
  t.equal(res.status, 201);
  t.same(Object.keys(res.body.data).sort(), ['id', 'mode', 'name', 'status', 'type', 'uuid']);
  t.match(res.body, { message: String, data: { name: 'Front desk', status: 'inactive', type: 'outbound', mode: 'pipeline' } });
  const data = await read(res.body.data.id);
  t.equal(res.body.data.uuid, data.uuid, 'the create answer carries the uuid a read shows');
  const started = await api.request('POST', '/conversations', { token: alice.token, body: { assistant_id: res.body.data.uuid, type: 'test' } });
  t.equal(started.status, 200, 'a conversation starts with the uuid straight from the create answer');
  t.match(data, {
    id: res.body.data.id,
    uuid: /^[0-9a-f-]{36}$/,
    status: 'inactive',
    llm_model_id: 1,
    multimodal_model_id: null,
    chat_llm_fallback_id: null,
    turn_detection_threshold: null,
    secondary_language_ids: [],
    knowledgebase_id: null,
    knowledgebase_mode: 'function_call',
    phone_number_id: null,
    tool_ids: [],
    tools: [],
    tts_emotion_enabled: true,
    voice_stability: 0.7,
    voice_similarity: 0.5,
    speech_speed: 1,
    llm_temperature: 0.1,
    synthesizer_provider_id: 1,
    transcriber_provider_id: 11,
    allow_interruptions: true,
    fillers: false,
    record: false,
    enable_noise_cancellation: true,
    wait_for_customer: false,
    max_duration: 600,
    max_silence_duration: 40,
    max_initial_silence_duration: null,
    ringing_time: 30,
    reengagement_interval: 30,
    reengagement_prompt: null,
    end_call_on_voicemail: true,
    voice_mail_message: null,
    endpoint_type: 'vad',
    endpoint_sensitivity: 0.5,
    interrupt_sensitivity: 0.5,
    min_interrupt_words: null,
    ambient_sound: 'off',
    ambient_sound_volume: 0.5,
    is_webhook_active: false,
    webhook_url: null,
    send_webhook_only_on_completed: true,
    include_recording_in_webhook: true,
    post_call_evaluation: true,
    post_call_schema: [],
    variables: {},
    created_at: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/,
    updated_at: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/,
  });
  t.notOk('user_id' in data);
  const list = await api.request('GET', '/user/assistants', { token: alice.token });
  t.ok(list.body.data.some((a: { id: number; uuid: string }) => a.id === data.id && a.uuid === data.uuid));
  t.same(list.body.data.find((a: { id: number }) => a.id === data.id), data, 'the list shows each assistant as its read does, without its owner');
});

t.test('field validation', async (t) => {
  const empty = await create({});
  t.equal(empty.status, 422);
  t.equal(empty.body.message, 'Validation failed');
  t.same(Object.keys(empty.body.errors).sort(), ['initial_message', 'language_id', 'mode', 'name', 'system_prompt', 'timezone', 'type', 'voice_id']);
  t.same(empty.body.errors.name, ['The name field is required.']);
  const ranges = await create({ ...base, speech_speed: 1.5, max_duration: 10, ringing_time: 61, reengagement_interval: 5, endpoint_sensitivity: 6, min_interrupt_words: 11, initial_message: 'x'.repeat(201), ambient_sound: 'rain', timezone: 'Mars/Olympus' });
  t.same(ranges.body.errors, {
    speech_speed: ['The speech speed must be between 0.7 and 1.2.'],
    max_duration: ['The max duration must be between 20 and 1200.'],
    ringing_time: ['The ringing time must be between 1 and 60.'],
    reengagement_interval: ['The reengagement interval must be between 7 and 600.'],
    endpoint_sensitivity: ['The endpoint sensitivity must be between 0 and 5.'],
    min_interrupt_words: ['The min interrupt words must be between 0 and 10.'],
    initial_message: ['The initial message may not be greater than 200 characters.'],
    ambient_sound: ['The selected ambient sound is invalid.'],
  });
  const zone = await create({ ...base, timezone: 'Mars/Olympus' });
  t.same(zone.body.errors, { timezone: ['The timezone must be a valid zone.'] });
  const schema = await create({ ...base, post_call_schema: [{ name: 'Bad Name', type: 'date', description: 'x' }] });
  t.same(schema.body.errors, {
    'post_call_schema.0.name': ['The post call schema name may only contain lowercase letters, numbers and underscores.'],
    'post_call_schema.0.type': ['The selected post call schema.0.type is invalid.'],
    'post_call_schema.0.description': ['The post call schema.0.description must be at least 3 characters.'],
  });
  const nested = await create({ ...base, variables: { ok: { nested: true } } });
  t.same(nested.body.errors, { 'variables.ok': ['The variables.ok must be a string, number or boolean.'] });
  const badKey = await create({ ...base, variables: { 'bad key': 'x' } });
  t.equal(badKey.status, 422);
});

t.test('rules 1-7 on create', async (t) => {
  const noLlm = await create({ ...base, llm_model_id: undefined });
  t.same(noLlm.body.errors, { llm_model_id: ['The llm model id field is required when mode is pipeline.'] });
  const noRealtime = await create({ ...base, mode: 'multimodal', voice_id: 31, llm_model_id: undefined });
  t.same(noRealtime.body.errors, { multimodal_model_id: ['The multimodal model id field is required when mode is multimodal.'] });
  const wrongModel = await create({ ...base, llm_model_id: 21 });
  t.same(wrongModel.body.errors, { llm_model_id: ['The selected llm model id is invalid.'] });

  const incompatible = await create({ ...base, voice_id: 31 });
  t.same(incompatible.body.errors, { voice_id: ['The selected voice is not compatible with the pipeline engine type.'] });
  const ttsInMultimodal = await create({ ...base, mode: 'multimodal', multimodal_model_id: 21 });
  t.match(ttsInMultimodal.body.errors.voice_id[0], /not compatible with the multimodal engine type/);

  const multimodalRules = await create({ ...base, mode: 'dualplex', multimodal_model_id: 21, knowledgebase_mode: 'prompt', allow_interruptions: false, fillers: true });
  t.same(multimodalRules.body.errors, {
    knowledgebase_mode: ['Only function_call knowledgebase mode is available for multimodal and dualplex assistants.'],
    allow_interruptions: ['Interruptions cannot be disabled in multimodal or dualplex mode.'],
    fillers: ['Fillers are only available in pipeline mode.'],
  });
  const dualplex = await create({ ...base, mode: 'dualplex', multimodal_model_id: 22, llm_model_id: undefined });
  t.equal(dualplex.status, 201);
  t.match(await read(dualplex.body.data.id), { synthesizer_provider_id: 1, transcriber_provider_id: null, multimodal_model_id: 22 });
  const multimodal = await create({ ...base, mode: 'multimodal', voice_id: 31, multimodal_model_id: 21, llm_model_id: undefined, turn_detection_threshold: 0.6 });
  t.equal(multimodal.status, 201);
  t.match(await read(multimodal.body.data.id), { synthesizer_provider_id: null, transcriber_provider_id: null, turn_detection_threshold: 0.6 });

  const webhook = await create({ ...base, is_webhook_active: true });
  t.same(webhook.body.errors, { webhook_url: ['The webhook url field is required when is webhook active is true.'] });

  const bobTool = (await api.request('POST', '/user/tools', { token: bob.token, body: { name: 'bobs', description: 'Bob tool', endpoint: 'https://b.example', method: 'GET' } })).body.data.id;
  const bobKb = (await api.request('POST', '/user/knowledgebases', { token: bob.token, body: { name: 'Bob KB' } })).body.data.id;
  const bobNumber = await ownedNumber(bob.id, '+14155550999');
  const foreign = await create({ ...base, tool_ids: [bobTool], knowledgebase_id: bobKb, phone_number_id: bobNumber });
  t.same(foreign.body.errors, {
    'tool_ids.0': ['The selected tool ids.0 is invalid.'],
    knowledgebase_id: ['The selected knowledgebase id is invalid.'],
    phone_number_id: ['The selected phone number id is invalid.'],
  });

  const callerId = await ownedNumber(alice.id, '+14155550998', 'caller_id');
  const inboundCaller = await create({ ...base, type: 'inbound', phone_number_id: callerId });
  t.same(inboundCaller.body.errors, { phone_number_id: ['A caller ID number cannot be used by an inbound assistant.'] });
  t.equal((await create({ ...base, type: 'outbound', phone_number_id: callerId })).status, 201, 'caller ID is fine outbound');

  const number = await ownedNumber(alice.id, '+14155550997');
  t.equal((await create({ ...base, type: 'inbound', phone_number_id: number })).status, 201);
  const taken = await create({ ...base, type: 'inbound', phone_number_id: number });
  t.same(taken.body.errors, { phone_number_id: ['The phone number is already assigned to another inbound assistant.'] });
  t.equal((await create({ ...base, type: 'outbound', phone_number_id: number })).status, 201, 'outbound may share it');

  const racing = await ownedNumber(alice.id, '+14155550996');
  const race = await Promise.all(Array.from({ length: 4 }, () => create({ ...base, type: 'inbound', phone_number_id: racing })));
  t.same(race.map((r) => r.status).sort(), [201, 422, 422, 422], 'one inbound assistant per number under concurrency');
});

t.test('update semantics', async (t) => {
  const tool1 = (await api.request('POST', '/user/tools', { token: alice.token, body: { name: 'one', description: 'Tool one', endpoint: 'https://a.example', method: 'GET' } })).body.data.id;
  const tool2 = (await api.request('POST', '/user/tools', { token: alice.token, body: { name: 'two', description: 'Tool two', endpoint: 'https://a.example', method: 'GET' } })).body.data.id;
  const kb = (await api.request('POST', '/user/knowledgebases', { token: alice.token, body: { name: 'KB' } })).body.data.id;
  const created = await create({
    ...base,
    tool_ids: [tool1, tool2],
    knowledgebase_id: kb,
    knowledgebase_mode: 'prompt',
    secondary_language_ids: [2, 3],
    variables: { company: 'Acme', year: 2026 },
    max_initial_silence_duration: 15,
    reengagement_prompt: 'Still there?',
    post_call_schema: [{ name: 'intent', type: 'string', description: 'Why they called' }],
    fillers: true,
  });
  t.equal(created.status, 201);
  const id = created.body.data.id;

  const partial = await update(id, { name: 'Renamed', speech_speed: 0.9 });
  t.same([partial.status, partial.body.data], [200, { id, uuid: created.body.data.uuid, name: 'Renamed', status: 'inactive', type: 'outbound', mode: 'pipeline' }]);
  t.match(await read(id), { name: 'Renamed', speech_speed: 0.9, tool_ids: [tool1, tool2], knowledgebase_id: kb, variables: { company: 'Acme', year: 2026 } });

  await update(id, { tool_ids: [tool2], secondary_language_ids: [], variables: { city: 'Berlin' }, post_call_schema: [] });
  t.match(await read(id), { tool_ids: [tool2], secondary_language_ids: [], variables: { city: 'Berlin' }, post_call_schema: [] });
  t.same((await read(id)).variables, { city: 'Berlin' }, 'variables replaced, not merged');

  await update(id, { knowledgebase_id: null, max_initial_silence_duration: null, reengagement_prompt: null, min_interrupt_words: null });
  t.match(await read(id), { knowledgebase_id: null, max_initial_silence_duration: null, reengagement_prompt: null });
  const notNullable = await update(id, { name: null, max_duration: null });
  t.same(Object.keys(notNullable.body.errors).sort(), ['max_duration', 'name']);

  const badSpeed = await update(id, { speech_speed: 1.3 });
  t.same([badSpeed.status, badSpeed.body], [422, { message: 'Validation failed', errors: { speech_speed: ['The speech speed must be between 0.7 and 1.2.'] } }]);
  const noInterrupt = await update(id, { mode: 'multimodal', voice_id: 31, allow_interruptions: false });
  t.same(noInterrupt.body.errors, { allow_interruptions: ['Interruptions cannot be disabled in multimodal or dualplex mode.'] });
  const incompatible = await update(id, { mode: 'multimodal' });
  t.match(incompatible.body.errors.voice_id[0], /not compatible/);

  const switched = await update(id, { mode: 'multimodal', voice_id: 32 });
  t.equal(switched.status, 200);
  t.match(await read(id), { mode: 'multimodal', llm_model_id: null, multimodal_model_id: 21, synthesizer_provider_id: null, transcriber_provider_id: null, fillers: false, knowledgebase_mode: 'function_call', tool_ids: [tool2] });
  const back = await update(id, { mode: 'pipeline', voice_id: 3 });
  t.match(await read(id), { mode: 'pipeline', llm_model_id: 1, multimodal_model_id: null, synthesizer_provider_id: 1, transcriber_provider_id: 11 });
  t.equal(back.status, 200);
  const chosen = await update(id, { mode: 'dualplex', multimodal_model_id: 23, synthesizer_provider_id: 2 });
  t.equal(chosen.status, 200);
  t.match(await read(id), { mode: 'dualplex', multimodal_model_id: 23, synthesizer_provider_id: 2 }, 'explicit values win over the reset');
  const transcriberInDualplex = await update(id, { transcriber_provider_id: 12 });
  t.match(transcriberInDualplex.body.errors.transcriber_provider_id[0], /only be set in pipeline/);
  await update(id, { synthesizer_provider_id: null });
  t.equal((await read(id)).synthesizer_provider_id, 1, 'null provider chosen again from the voice');

  const inbound = await ownedNumber(alice.id, '+14155550995');
  const other = await create({ ...base, type: 'inbound', phone_number_id: inbound });
  t.equal((await update(other.body.data.id, { name: 'Same number, same assistant' })).status, 200, 'an assistant keeps its own number');
  const steal = await update(id, { type: 'inbound', phone_number_id: inbound });
  t.same(steal.body.errors, { phone_number_id: ['The phone number is already assigned to another inbound assistant.'] });

  await api.request('DELETE', `/user/tools/${tool2}`, { token: alice.token });
  t.same((await read(id)).tool_ids, [], 'a deleted tool is detached');

  const missing = await update(999999, { speech_speed: 5 });
  t.same([missing.status, missing.body], [404, { message: 'Assistant not found' }]);
});

t.test('built-in tools', async (t) => {
  const bad = await create({ ...base, tools: [{ type: 'call_transfer' }, { type: 'calendar_integration' }, { type: 'teleport' }] });
  t.same(bad.body.errors, {
    'tools.2.type': ['The selected tools.2.type is invalid.'],
  });
  const missing = await create({ ...base, tools: [{ type: 'call_transfer', phone_number: '0800' }, { type: 'calendar_integration', calendar_event_slug: 'demo' }] });
  t.same(missing.body.errors, {
    'tools.0.phone_number': ['The tools.0.phone number must be a phone number in E.164 format.'],
    'tools.1.calendar_api_key': ['The tools.1.calendar api key field is required when tools.1.type is calendar_integration.'],
  });
  const tools = [
    { type: 'call_transfer', phone_number: '+14155550100', description: 'When the caller asks for a human', custom: false, timezone: 'America/New_York' },
    { type: 'end_call', description: 'When the caller says goodbye' },
    { type: 'dtmf_input', description: 'To navigate menus' },
    { type: 'calendar_integration', calendar_api_key: 'cal_live_x', calendar_event_slug: 'demo', description: 'Offer a demo' },
  ];
  const ok = await create({ ...base, tools });
  t.equal(ok.status, 201);
  t.same((await read(ok.body.data.id)).tools, tools);
});

t.test('webhooks, delete and isolation', async (t) => {
  const id = (await create(base)).body.data.id;
  const enable = await api.request('POST', '/user/assistants/enable-webhook', { token: alice.token, body: { assistant_id: id, webhook_url: 'https://hooks.example.com/calls' } });
  t.same(enable.body, { message: 'Webhook enabled successfully', data: [] });
  t.match(await read(id), { is_webhook_active: true, webhook_url: 'https://hooks.example.com/calls' });
  const disable = await api.request('POST', '/user/assistants/disable-webhook', { token: alice.token, body: { assistant_id: id } });
  t.same([disable.status, disable.body], [200, { message: 'Webhook disabled successfully', data: [] }]);
  t.match(await read(id), { is_webhook_active: false, webhook_url: null, status: 'inactive' });
  const noId = await api.request('POST', '/user/assistants/disable-webhook', { token: alice.token, body: {} });
  t.same([noId.status, noId.body], [422, { message: 'The given data was invalid.', errors: { assistant_id: ['The assistant id field is required.'] } }]);
  const badUrl = await api.request('POST', '/user/assistants/enable-webhook', { token: alice.token, body: { assistant_id: id, webhook_url: 'nope' } });
  t.equal(badUrl.status, 422);

  for (const [method, path, body] of [
    ['GET', `/user/assistant/${id}`],
    ['PUT', `/user/assistant/${id}`, { name: 'mine' }],
    ['DELETE', `/user/assistant/${id}`],
    ['POST', '/user/assistants/disable-webhook', { assistant_id: id }],
    ['POST', '/user/assistants/enable-webhook', { assistant_id: id, webhook_url: 'https://evil.example' }],
  ] as const) {
    const res = await api.request(method, path, { token: bob.token, body });
    t.same([res.status, res.body], [404, { message: 'Assistant not found' }], `${method} ${path} by another user`);
  }
  t.notOk((await api.request('GET', '/user/assistants', { token: bob.token })).body.data.some((a: { id: number }) => a.id === id));
  t.equal((await update(id, { name: 'still mine' })).status, 200);

  const deleted = await api.request('DELETE', `/user/assistant/${id}`, { token: alice.token });
  t.same([deleted.status, deleted.body], [200, { message: 'Assistant deleted successfully' }]);
  const again = await api.request('DELETE', `/user/assistant/${id}`, { token: alice.token });
  t.same([again.status, again.body], [404, { message: 'Assistant not found' }]);
});

t.test('deleting a knowledgebase detaches it from assistants', async (t) => {
  const kb = (await api.request('POST', '/user/knowledgebases', { token: alice.token, body: { name: 'Temp' } })).body.data.id;
  const id = (await create({ ...base, knowledgebase_id: kb })).body.data.id;
  t.equal((await api.request('GET', `/user/knowledgebases/${kb}`, { token: alice.token })).body.data.assistants_count, 1);
  await api.request('DELETE', `/user/knowledgebases/${kb}`, { token: alice.token });
  t.equal((await read(id)).knowledgebase_id, null);
});

t.test('a number deleted while an update that checked it is writing: 422, not a database error', async (t) => {
  const { id } = (await create(base)).body.data;
  const numberId = await ownedNumber(alice.id, '+15005550199');
  await withClient(api.databaseUrl, async (db) => {
    // The deletion holds its lock until committed, so the update's reference check waits on it.
    await db.query('BEGIN');
    await db.query('DELETE FROM phone_numbers WHERE id = $1', [numberId]);
    const updating = update(id, { phone_number_id: numberId });
    // pg_stat_activity is read once per transaction unless its snapshot is cleared.
    const waiting = async () => {
      await db.query('SELECT pg_stat_clear_snapshot()');
      return (await db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE assistants%'`)).rows[0].n as number;
    };
    while ((await waiting()) === 0) await new Promise((resolve) => setImmediate(resolve));
    await db.query('COMMIT');
    const refused = await updating;
    t.same([refused.status, refused.body], [422, { message: 'Validation failed', errors: { phone_number_id: ['The selected phone number id is invalid.'] } }]);
  });
  t.equal((await read(id)).phone_number_id, null);
});
