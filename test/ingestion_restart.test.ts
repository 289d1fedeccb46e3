/**
 * A job interrupted by a server kill resumes after restart: the killed server's lease expires and
 * the next server claims the job again, so the document does not stay `processing` forever.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import t from 'tap';
import { freshDatabase, withClient } from './helpers/database.js';
import { html, startSite } from './helpers/site.js';

const databaseUrl = await freshDatabase();
const dataDir = await mkdtemp(join(tmpdir(), 'ap-restart-'));
t.teardown(() => rm(dataDir, { recursive: true, force: true }));
const site = await startSite(t);

async function start(): Promise<{ child: ChildProcess; origin: string; exited: Promise<unknown> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], {
    env: { ...process.env, PORT: '0', DATA_DIR: dataDir, DATABASE_URL: databaseUrl, LOG_LEVEL: 'info', OUTBOUND_ALLOW_PRIVATE: 'true' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const entry = JSON.parse(line) as { msg: string; port?: number };
      if (entry.msg === 'platform listening') resolve(entry.port!);
    });
    void exited.then(() => reject(new Error('server exited before listening')));
  });
  return { child, origin: `http://127.0.0.1:${port}`, exited };
}

const call = async (origin: string, method: string, path: string, token?: string, body?: unknown) => {
  const response = await fetch(`${origin}/api${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await response.json()) as any;
};

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

t.test('a killed server leaves its job to the next one', async (t) => {
  let slow = true;
  site.route('/manual', () => (slow ? { body: html('Manual', '<p>never sent</p>'), delayMs: 60_000 } : { body: html('Manual', '<p>Support hours are nine to five.</p>') }));

  const first = await start();
  const { token } = await call(first.origin, 'POST', '/auth/register', undefined, { name: 'A', email: 'a@example.com', password: 'password123' });
  const kb = (await call(first.origin, 'POST', '/user/knowledgebases', token, { name: 'KB' })).data.id;
  const doc = (await call(first.origin, 'POST', `/user/knowledgebases/${kb}/documents`, token, { name: 'Manual', type: 'website', url: `${site.origin}/manual` })).data.id;
  await until('the job to fetch the page', async () => (site.requests.includes('/manual') ? true : undefined));
  first.child.kill('SIGKILL');
  await first.exited;
  const job = await withClient(databaseUrl, async (db) => (await db.query('SELECT status, attempts FROM document_jobs WHERE document_id = $1', [doc])).rows[0]);
  t.same(job, { status: 'running', attempts: 1 }, 'the job was in flight when the server died');
  // Its lease runs out as time passes; here it is made to have run out, so the next server claims
  // the job at once and no real time has to pass.
  await withClient(databaseUrl, (db) => db.query(`UPDATE document_jobs SET lease_expires_at = now() - interval '1 second' WHERE document_id = $1`, [doc]));

  slow = false;
  const second = await start();
  const settled = await until('the document to settle', async () => {
    const data = (await call(second.origin, 'GET', `/user/knowledgebases/${kb}/documents/${doc}`, token)).data;
    return data.status === 'processing' ? undefined : data;
  });
  t.match(settled, { status: 'active', error: null });
  const after = await withClient(databaseUrl, async (db) => (await db.query('SELECT status, attempts FROM document_jobs WHERE document_id = $1', [doc])).rows[0]);
  t.same(after, { status: 'done', attempts: 2 });
  const found = await call(second.origin, 'POST', `/user/knowledgebases/${kb}/search`, token, { query: 'support hours' });
  t.match(found.data[0], { content: /nine to five/ });
  second.child.kill('SIGTERM');
  await second.exited;
});
