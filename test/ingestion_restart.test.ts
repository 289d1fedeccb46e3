/**
 * A job interrupted by a server kill resumes after restart: the killed server's lease expires and
 * the next server claims the job again, so the document does not stay `processing` forever.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { freshDatabase, withClient } from './helpers/database.js';
import { spawnServer } from './helpers/server_process.js';
import { html, startSite } from './helpers/site.js';

const databaseUrl = await freshDatabase();
const dataDir = await mkdtemp(join(tmpdir(), 'ap-restart-'));
t.teardown(() => rm(dataDir, { recursive: true, force: true }));
const site = await startSite(t);

async function start() {
  const server = spawnServer({ dataDir, env: { DATABASE_URL: databaseUrl, OUTBOUND_ALLOW_PRIVATE: 'true' } });
  return { ...server, origin: await server.listening() };
}

const call = async (origin: string, method: string, path: string, token?: string, body?: unknown) => {
  const response = await fetch(`${origin}/api${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await response.json()) as any;
};

t.test('a killed server leaves its job to the next one', async (t) => {
  let slow = true;
  site.route('/manual', () => (slow ? { body: html('Manual', '<p>never sent</p>'), delayMs: 60_000 } : { body: html('Manual', '<p>Support hours are nine to five.</p>') }));

  const first = await start();
  const { token } = await call(first.origin, 'POST', '/auth/register', undefined, { name: 'A', email: 'a@example.com', password: 'password123' });
  const kb = (await call(first.origin, 'POST', '/user/knowledgebases', token, { name: 'KB' })).data.id;
  const doc = (await call(first.origin, 'POST', `/user/knowledgebases/${kb}/documents`, token, { name: 'Manual', type: 'website', url: `${site.origin}/manual` })).data.id;
  await site.requested('/manual');
  first.child.kill('SIGKILL');
  await first.exited;
  const job = await withClient(databaseUrl, async (db) => (await db.query('SELECT status, attempts FROM document_jobs WHERE document_id = $1', [doc])).rows[0]);
  t.same(job, { status: 'running', attempts: 1 }, 'the job was in flight when the server died');
  // Its lease runs out as time passes; here it is made to have run out, so the next server claims
  // the job at once and no real time has to pass.
  await withClient(databaseUrl, (db) => db.query(`UPDATE document_jobs SET lease_expires_at = now() - interval '1 second' WHERE document_id = $1`, [doc]));

  slow = false;
  const second = await start();
  // Logged once its outcome is recorded.
  await second.line((line) => line.msg === 'document ingested' && line.documentId === doc);
  const settled = (await call(second.origin, 'GET', `/user/knowledgebases/${kb}/documents/${doc}`, token)).data;
  t.match(settled, { status: 'active', error: null });
  const after = await withClient(databaseUrl, async (db) => (await db.query('SELECT status, attempts FROM document_jobs WHERE document_id = $1', [doc])).rows[0]);
  t.same(after, { status: 'done', attempts: 2 });
  const found = await call(second.origin, 'POST', `/user/knowledgebases/${kb}/search`, token, { query: 'support hours' });
  t.match(found.data[0], { content: /nine to five/ });
  second.child.kill('SIGTERM');
  await second.exited;
});
