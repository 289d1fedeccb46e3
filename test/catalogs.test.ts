/**
 * Catalogs seeded by migrations:
 * 1. languages: a plain array of at least 20 {id, name, iso_2}.
 * 2. voices: at least 30 over at least three TTS providers; mode filter (multimodal-native voices
 *    only in multimodal, TTS voices in pipeline and dualplex); language filter keeps multilingual voices.
 * 3. models: at least 6 llm and 3 multimodal, each {id, name, code, provider}.
 * 4. providers: synthesizers and transcribers.
 * 5. bad filters are 422; all of it needs authentication.
 */
import t from 'tap';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const { token } = await api.user();

t.test('languages', async (t) => {
  const res = await api.request('GET', '/user/assistants/languages', { token });
  t.equal(res.status, 200);
  t.ok(Array.isArray(res.body), 'a plain array');
  t.ok(res.body.length >= 20);
  t.same(res.body[0], { id: 1, name: 'English', iso_2: 'en' });
  t.ok(res.body.every((l: { iso_2: string }) => /^[a-z]{2}$/.test(l.iso_2)));
  t.equal((await api.request('GET', '/user/assistants/languages')).status, 401);
});

t.test('voices', async (t) => {
  const all = await api.request('GET', '/user/assistants/voices', { token });
  t.ok(all.body.data.length >= 30);
  t.same(Object.keys(all.body.data[0]).sort(), ['accent', 'age', 'gender', 'id', 'language_id', 'modes', 'name', 'preview_url', 'synthesizer_provider_id']);
  const providers = new Set(all.body.data.map((v: { synthesizer_provider_id: number | null }) => v.synthesizer_provider_id).filter((p: number | null) => p !== null));
  t.ok(providers.size >= 3, 'three or more TTS providers');

  const multimodal = await api.request('GET', '/user/assistants/voices?mode=multimodal', { token });
  t.ok(multimodal.body.data.length >= 3);
  t.ok(multimodal.body.data.every((v: { modes: string[]; synthesizer_provider_id: unknown }) => v.modes.length === 1 && v.modes[0] === 'multimodal' && v.synthesizer_provider_id === null));
  const pipeline = await api.request('GET', '/user/assistants/voices?mode=pipeline', { token });
  t.ok(pipeline.body.data.every((v: { modes: string[] }) => v.modes.includes('pipeline') && v.modes.includes('dualplex')));

  const german = await api.request('GET', '/user/assistants/voices?mode=pipeline&language_id=2', { token });
  t.ok(german.body.data.some((v: { language_id: number | null }) => v.language_id === 2));
  t.ok(german.body.data.every((v: { language_id: number | null }) => v.language_id === 2 || v.language_id === null));

  const badMode = await api.request('GET', '/user/assistants/voices?mode=robot', { token });
  t.same([badMode.status, badMode.body.errors], [422, { mode: ['The selected mode is invalid.'] }]);
  const badLanguage = await api.request('GET', '/user/assistants/voices?language_id=9999', { token });
  t.same([badLanguage.status, badLanguage.body.errors], [422, { language_id: ['The selected language id is invalid.'] }]);
  t.equal((await api.request('GET', '/user/assistants/voices?language_id=abc', { token })).status, 422);
});

t.test('models and providers', async (t) => {
  const llm = await api.request('GET', '/user/assistants/models?type=llm', { token });
  t.ok(llm.body.data.length >= 6);
  t.same(Object.keys(llm.body.data[0]).sort(), ['code', 'id', 'name', 'provider']);
  const multimodal = await api.request('GET', '/user/assistants/models?type=multimodal', { token });
  t.ok(multimodal.body.data.length >= 3);
  t.notOk(multimodal.body.data.some((m: { id: number }) => llm.body.data.some((l: { id: number }) => l.id === m.id)));
  const all = await api.request('GET', '/user/assistants/models', { token });
  t.equal(all.body.data.length, llm.body.data.length + multimodal.body.data.length);
  t.equal((await api.request('GET', '/user/assistants/models?type=tts', { token })).status, 422);

  const providers = await api.request('GET', '/user/assistants/providers', { token });
  t.ok(providers.body.data.synthesizers.length >= 3);
  t.ok(providers.body.data.transcribers.length >= 3);
  t.match(providers.body.data.synthesizers[0], { id: Number, name: String, code: String });
});
