/**
 * Two processes on one database, each with a data directory of its own (two machines):
 * 1. a file uploaded to the first is ingested by the second (the first is busy with another
 *    document): its bytes are in the database until then, and on neither machine's disk;
 * 2. a recording link the first gives opens on the second, which holds the recording; a link
 *    with a wrong signature does not.
 * The second process's ingestion looks for jobs only when its manual clock is moved.
 */
import { access, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { recordingUrl } from '../runtime/calls/recording.js';
import { ManualClock } from '../runtime/clock.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { startSite } from './helpers/site.js';

const databaseUrl = await freshDatabase();
const a = await startTestPlatform(t, { databaseUrl, ingestionConcurrency: 1, outboundAllowPrivate: true });
const clock = new ManualClock();
const logged: Array<Record<string, unknown>> = [];
const b = await startTestPlatform(t, { databaseUrl }, { clock }, (line) => void logged.push(line));
const owner = await a.user();

t.test('a file uploaded to one process is ingested by another', async (t) => {
  t.not(a.config.dataDir, b.config.dataDir, 'each its own data directory');
  // The second process has looked for jobs at its start and found none; it looks again only when told.
  await b.platform.runtime.settled();
  const site = await startSite(t);
  site.route('/slow', { heldUntil: new Promise(() => {}) });
  const kb = (await a.request('POST', '/user/knowledgebases', { token: owner.token, body: { name: 'Help' } })).body.data.id as number;
  const documents = `/user/knowledgebases/${kb}/documents`;
  await a.request('POST', documents, { token: owner.token, body: { name: 'Slow', type: 'website', url: `${site.origin}/slow` } });
  await site.requested('/slow');

  const text = 'Opening hours: nine to five on weekdays.\n\nParking is free behind the building.';
  const form = new FormData();
  form.set('name', 'Hours');
  form.set('type', 'txt');
  form.set('file', new Blob([text], { type: 'text/plain' }), 'hours.txt');
  const uploaded = await a.request('POST', documents, { token: owner.token, raw: form });
  t.equal(uploaded.status, 201);
  const id = uploaded.body.data.id as number;
  const stored = () => withClient(databaseUrl, async (db) => (await db.query(`SELECT convert_from(bytes, 'UTF8') AS text FROM document_uploads WHERE document_id = $1`, [id])).rows);
  t.same(await stored(), [{ text }], 'the bytes are in the database while the job waits');

  clock.advance(1_000);
  await b.platform.runtime.settled();
  t.equal(logged.filter((line) => line.msg === 'document ingested' && line.documentId === id).length, 1, 'the second process ingested it');
  t.match((await a.request('GET', `${documents}/${id}`, { token: owner.token })).body.data, { status: 'active', error: null });
  t.match((await a.request('POST', `/user/knowledgebases/${kb}/search`, { token: owner.token, body: { query: 'opening hours' } })).body.data[0], { document_id: id, content: /nine to five/ });
  t.same(await stored(), [], 'and once ingested the bytes are gone');
  for (const dir of [a.config.dataDir, b.config.dataDir]) await t.rejects(access(join(dir, 'uploads')), `nothing under ${dir}/uploads`);
});

t.test('a recording link one process gives opens on another', async (t) => {
  t.ok(a.platform.runtime.recordings.secret.equals(b.platform.runtime.recordings.secret), 'one key for both');
  const callId = await withClient(databaseUrl, async (db) => Number((await db.query(
    `INSERT INTO calls (user_id, assistant_name, type, mode, status, duration) VALUES ($1, 'Caller', 'outbound', 'pipeline', 'completed', 1) RETURNING id`,
    [owner.id],
  )).rows[0].id));
  await withClient(databaseUrl, (db) => db.query(`UPDATE calls SET recording_path = $2 WHERE id = $1`, [callId, `${callId}.wav`]));
  // The second process held the call: the recording is on its disk.
  const wav = Buffer.from('RIFF....WAVE recorded on the second machine');
  await mkdir(b.platform.runtime.recordings.dir, { recursive: true });
  await writeFile(join(b.platform.runtime.recordings.dir, `${callId}.wav`), wav);

  const given = new URL(recordingUrl(a.origin, a.platform.runtime.recordings.secret, callId, Date.now()));
  const link = `${b.origin}${given.pathname}${given.search}`;
  const served = await fetch(link);
  t.equal(served.status, 200);
  t.same(Buffer.from(await served.arrayBuffer()), wav);
  const forged = new URL(link);
  forged.searchParams.set('signature', 'f'.repeat(64));
  t.equal((await fetch(forged)).status, 403, 'a wrong signature is still refused');
});
