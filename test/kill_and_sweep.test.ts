import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { Conditions } from './helpers/conditions.js';
import { freshDatabase, withClient } from './helpers/database.js';
import { embeddedUrl, isRunning, spawnServer, startServer, until, type LogLine, type RunningServer } from './helpers/server_process.js';

/**
 * Servers killed outright (SIGKILL), and servers refused before they touch anything:
 * 1. Two servers on one database; the one holding live calls is killed. The other settles them
 *    within the configured sweep time, each charged up to when it was last heard (the kill, to the
 *    heartbeat), with its transcript so far (written with the heartbeat) and its webhook delivered;
 *    the events its process wrote with its heartbeats are kept, and the sweep's end follows them.
 * 2. The one server on its embedded database is killed with a live call; the next start takes the
 *    orphaned PostgreSQL over and settles the call at once, charged up to when it was last heard,
 *    its transcript so far kept.
 * 3. A second start on a port in use is refused in one line before it touches any database; the
 *    first keeps serving.
 */

const ADMIN = 'admin-token-0123456789';
/** Timings of the sweep, shortened so a test waits seconds, not a minute. */
const PRESENCE = { CALL_HEARTBEAT_MS: '200', CALL_ORPHAN_AFTER_MS: '1500', CALL_SWEEP_MS: '250' };

async function dataDir(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ap-kill-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function receiver(t: Test): Promise<{ url: string; calls: number[]; arrived: Conditions }> {
  const calls: number[] = [];
  const arrived = new Conditions();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    req.on('end', () => {
      calls.push(Number((JSON.parse(raw) as { id: number }).id));
      arrived.changed();
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, calls, arrived };
}

/** Matches the log line by which `ids` have all been swept (ended and charged), over one sweep or several. */
function sweptAll(ids: readonly number[]): (line: LogLine) => boolean {
  const swept = new Set<number>();
  return (line) => {
    if (line.msg !== 'ended and charged calls left open by a stopped process') return false;
    for (const id of line.calls as number[]) swept.add(id);
    return ids.every((id) => swept.has(id));
  };
}

/** A funded user with an outbound assistant on a number; returns its token and assistant id. */
async function outboundAssistant(server: RunningServer, webhookUrl?: string): Promise<{ token: string; assistant: number }> {
  const registered = await server.api('POST', '/auth/register', { name: 'Ada', email: `ada${Date.now()}@example.com`, password: 'a long password' });
  const token = registered.body.token as string;
  await server.api('POST', `/admin/users/${registered.body.user.id}/balance`, { amount: 25, reason: 'test' }, ADMIN);
  const offer = (await server.api('GET', '/user/phone-numbers/search?country_code=US', undefined, token)).body.data[0];
  await server.api('POST', '/user/phone-numbers/purchase', { phone_number: offer.phone_number }, token);
  const number = (await server.api('GET', '/user/phone-numbers/all', undefined, token)).body.data[0];
  const webhook = webhookUrl ? { webhook_url: webhookUrl, is_webhook_active: true } : {};
  const created = await server.api('POST', '/user/assistant', { name: 'Out', voice_id: 1, language_id: 1, type: 'outbound', mode: 'pipeline', timezone: 'UTC', initial_message: 'Hello.', system_prompt: 'Help', llm_model_id: 6, phone_number_id: number.id, ...webhook }, token);
  return { token, assistant: created.body.data.id as number };
}

async function liveCalls(server: RunningServer, account: { token: string; assistant: number }, count: number): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < count; i++) ids.push((await server.api('POST', '/user/calls', { assistant_id: account.assistant, phone_number: `+1415555020${i}` }, account.token)).body.data.id);
  for (const id of ids) {
    await until(`call ${id} to be answered`, async () => ((await server.api('GET', `/user/calls/${id}`, undefined, account.token)).body.data.status === 'in-progress' ? true : undefined));
  }
  return ids;
}

/** Seconds from each call's answer to `until` (ms), as the database has the answer time. */
async function talked(databaseUrl: string, ids: readonly number[], untilMs: number): Promise<Map<number, number>> {
  return withClient(databaseUrl, async (db) => {
    const { rows } = await db.query(`SELECT id, (extract(epoch FROM answered_at) * 1000)::float8 AS answered FROM calls WHERE id = ANY($1)`, [ids]);
    return new Map(rows.map((row: { id: string; answered: number }) => [Number(row.id), (untilMs - row.answered) / 1000]));
  });
}

t.test('a killed server\'s calls are settled by another server within the sweep time, charged to when they were last heard', async (t) => {
  const databaseUrl = await freshDatabase();
  const hook = await receiver(t);
  const env = { DATABASE_URL: databaseUrl, ADMIN_TOKEN: ADMIN, OUTBOUND_ALLOW_PRIVATE: 'true', ...PRESENCE };
  const doomed = await startServer(t, { dataDir: await dataDir(t), npm: true, env });
  const survivor = await startServer(t, { dataDir: await dataDir(t), npm: true, env });
  const account = await outboundAssistant(doomed, hook.url);
  const ids = await liveCalls(doomed, account, 2);
  // The calls talk for a while on the server's own (real) clock, so what is billed can be told
  // from what was talked.
  await new Promise((resolve) => setTimeout(resolve, 3_000));

  process.kill(doomed.pid, 'SIGKILL');
  const killedAt = Date.now();
  await doomed.exited;
  const talk = await talked(databaseUrl, ids, killedAt);
  await survivor.line(sweptAll(ids));
  const settledIn = Date.now() - killedAt;
  const settled = await Promise.all(ids.map(async (id) => (await survivor.api('GET', `/user/calls/${id}`, undefined, account.token)).body.data));
  t.ok(settledIn < 1_500 + 2 * 250 + 5_000, `settled ${settledIn} ms after the kill (orphan age 1.5 s, sweeps 0.25 s apart)`);
  for (const call of settled) {
    const spoke = talk.get(call.id)!;
    t.equal(call.status, 'ended', `call ${call.id} ended`);
    t.ok(call.duration >= Math.floor(spoke - 0.2) && call.duration <= Math.ceil(spoke) + 1, `call ${call.id}: billed ${call.duration} s of ${spoke.toFixed(2)} s talked (heartbeat 0.2 s)`);
    t.ok(call.total_cost > 0, `call ${call.id}: charged ${call.total_cost}`);
    t.equal(call.transcript, 'assistant: Hello.', `call ${call.id}: the transcript so far kept`);
    const events = (await survivor.api('GET', `/user/calls/${call.id}/events`, undefined, account.token)).body.data as Array<{ type: string; offset_ms: number; data: Record<string, unknown> }>;
    t.match(events[0], { type: 'start', offset_ms: 0, data: { type: 'outbound' } }, `call ${call.id}: its start, written with a heartbeat`);
    t.ok(events.some((e) => e.type === 'status' && e.data.status === 'in-progress'), `call ${call.id}: its answer`);
    t.ok(events.some((e) => e.type === 'turn' && e.data.role === 'assistant' && e.data.text === 'Hello.'), `call ${call.id}: the greeting's turn`);
    t.match(events.at(-1), { type: 'end', data: { status: 'ended', duration: call.duration, reason: 'orphaned' } }, `call ${call.id}: the end the sweep wrote, after the rest`);
    t.comment(`SIGKILL: call ${call.id} billed ${call.duration} s of ${spoke.toFixed(2)} s talked; settled ${settledIn} ms after the kill`);
  }
  const charges = await withClient(databaseUrl, async (db) => Number((await db.query(`SELECT count(*) AS n FROM ledger_entries WHERE kind = 'call' AND reference = ANY($1)`, [ids.map(String)])).rows[0].n));
  t.equal(charges, ids.length, 'one ledger entry per call');
  await hook.arrived.until(() => ids.every((id) => hook.calls.includes(id)));
  t.same([...hook.calls].sort(), [...ids].sort(), 'each call\'s webhook delivered once');
  survivor.child.kill('SIGTERM');
  await survivor.exited;
});

t.test('killed with a live call on its embedded database: the next start takes the database over and settles the call at once', async (t) => {
  const dir = await dataDir(t);
  const first = await startServer(t, { dataDir: dir, npm: true, env: { ADMIN_TOKEN: ADMIN } });
  const account = await outboundAssistant(first);
  const [id] = await liveCalls(first, account, 1);
  // Talk on the server's real clock, as above.
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  process.kill(first.pid, 'SIGKILL');
  const killedAt = Date.now();
  await first.exited;

  const next = await startServer(t, { dataDir: dir, npm: true, env: { ADMIN_TOKEN: ADMIN } });
  t.ok(next.log.some((l) => l.msg === 'stopping a PostgreSQL server left running by an earlier process'), 'the orphaned PostgreSQL was stopped and taken over');
  // The start's first sweep takes every open call (the database is this server's alone); a later
  // sweep would come tens of seconds on.
  const listeningAt = Date.now();
  await next.line(sweptAll([id!]));
  t.ok(Date.now() - listeningAt < 5_000, 'swept within 5 s of the start');
  const call = (await next.api('GET', `/user/calls/${id}`, undefined, account.token)).body.data;
  const spoke = (await talked(await embeddedUrl(next, dir), [id!], killedAt)).get(id!)!;
  t.equal(call.status, 'ended', 'ended at start-up, not a sweep later');
  t.equal(call.transcript, 'assistant: Hello.', 'the transcript so far kept');
  t.ok(call.duration >= Math.floor(spoke - 1) && call.duration <= Math.ceil(spoke) + 1, `billed ${call.duration} s of ${spoke.toFixed(2)} s talked (heartbeat 1 s)`);
  t.comment(`SIGKILL then restart: billed ${call.duration} s of ${spoke.toFixed(2)} s talked`);
  next.child.kill('SIGTERM');
  await next.exited;
});

t.test('a second start on a port in use is refused in one line before it touches a database; the first keeps serving', async (t) => {
  const first = await startServer(t, { dataDir: await dataDir(t), npm: true });
  const port = new URL(first.origin).port;
  const otherDir = await dataDir(t);
  const again = spawnServer({ dataDir: otherDir, npm: true, env: { PORT: port } });
  const exit = await again.exited;
  t.equal(exit.code, 1, 'exit status 1');
  // npm's own warnings about this machine's configuration aside.
  const said = again.stderr().split('\n').filter((line) => line && !line.startsWith('npm warn')).join('\n');
  t.match(said, new RegExp(`^Cannot listen on 127\\.0\\.0\\.1:${port}: the port is in use by another program \\(or another server of this platform\\)\\. Stop what holds it or set PORT \\(or HOST\\) to another one\\.$`), 'one line saying why and what to change');
  t.same(again.log.filter((l) => l.level >= 40), [], 'no warning or error lines besides it');
  t.same(await readdir(otherDir), [], 'its data directory untouched: no database was set up');
  t.equal((await first.api('GET', '/../health')).status, 200, 'the first keeps serving');
  t.ok(isRunning(first.pid));
  first.child.kill('SIGTERM');
  await first.exited;
});
