/**
 * GET /metrics (Prometheus text format):
 * 1. protected by METRICS_TOKEN when set (401 otherwise);
 * 2. HTTP durations by route pattern and status, event-loop lag, live conversations, open widget
 *    sockets, the document job queue and, with METRICS_BUSINESS, ledger debits by kind reflect
 *    what happened; without METRICS_BUSINESS no money figure is shown;
 * 3. without METRICS_TOKEN, answered to requests from this machine only: a loopback request is
 *    served; one that a proxy forwarded (X-Forwarded-For, Forwarded, X-Real-IP) and one from
 *    another address of the network are refused (403, saying to set METRICS_TOKEN).
 */
import { networkInterfaces } from 'node:os';
import t from 'tap';
import WebSocket from 'ws';
import { isLoopbackAddress } from '../runtime/net/addresses.js';
import { ADMIN_TOKEN, startTestPlatform } from './helpers/platform.js';

t.test('metrics', async (t) => {
  const api = await startTestPlatform(t, { metricsToken: 'scrape-token-123', metricsBusiness: true });
  const user = await api.user();
  await api.credit(user.id, 2);
  await api.request('POST', `/admin/users/${user.id}/balance`, { token: ADMIN_TOKEN, body: { amount: -0.5, reason: 'test debit' } });
  const bot = await api.assistant(user.token);
  const conversation = (await api.request('POST', '/conversations', { token: user.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id;
  await api.request('POST', `/conversations/${conversation}/messages`, { body: { message: 'hello' } });
  const socket = new WebSocket(`${api.origin.replace('http', 'ws')}/ws/conversations/${conversation}`);
  await new Promise((resolve) => socket.once('open', resolve));
  t.teardown(() => socket.close());

  t.equal((await api.request('GET', '//metrics')).status, 401);
  t.equal((await api.request('GET', '//metrics', { token: 'wrong' })).status, 401);
  const res = await api.request('GET', '//metrics', { token: 'scrape-token-123' });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/plain/);
  const text = res.body as string;
  t.match(text, /http_request_duration_seconds_count\{route="\/api\/conversations\/:id\/messages",method="POST",status="200"\} 1/);
  t.match(text, /nodejs_eventloop_lag_p99_seconds \d/);
  t.match(text, /active_conversations 1/);
  t.match(text, /open_sockets\{kind="widget"\} 1/);
  t.match(text, /document_job_queue_depth 0/);
  t.match(text, /ledger_debits_usd\{kind="admin_debit"\} 0\.5/);

  const operations = await startTestPlatform(t, { databaseUrl: api.databaseUrl, metricsToken: 'scrape-token-123' });
  const plain = (await operations.request('GET', '//metrics', { token: 'scrape-token-123' })).body as string;
  t.match(plain, /document_job_queue_depth 0/);
  t.notMatch(plain, /ledger|usd/i, 'no money figure without METRICS_BUSINESS');
});

const REFUSED = { message: 'Metrics are served only to this machine. Set METRICS_TOKEN to scrape them from elsewhere.' };

t.test('without METRICS_TOKEN, only this machine is answered', async (t) => {
  const local = await startTestPlatform(t, { metricsToken: undefined });
  const served = await local.request('GET', '//metrics');
  t.equal(served.status, 200, 'a loopback request');
  t.match(served.body, /document_job_queue_depth/);
  for (const [name, value] of [['x-forwarded-for', '203.0.113.9'], ['forwarded', 'for=203.0.113.9'], ['x-real-ip', '203.0.113.9']] as const) {
    const proxied = await local.request('GET', '//metrics', { headers: { [name]: value } });
    t.same([proxied.status, proxied.body], [403, REFUSED], `forwarded by a proxy (${name})`);
  }

  // The server listens on this machine's network address; a request to it comes from that address, not loopback.
  const address = Object.values(networkInterfaces()).flat().find((entry) => entry && entry.family === 'IPv4' && !entry.internal)?.address;
  if (!address) {
    t.comment('this machine has no network address besides loopback: the request from elsewhere is not tried');
    return;
  }
  const exposed = await startTestPlatform(t, { metricsToken: undefined, host: address });
  t.match(exposed.origin, address);
  const remote = await exposed.request('GET', '//metrics');
  t.same([remote.status, remote.body], [403, REFUSED], 'a request from another address');
  t.equal((await exposed.request('GET', '//health')).status, 200, 'the rest of the server answers it');
});

t.test('loopback addresses', async (t) => {
  for (const address of ['127.0.0.1', '127.3.2.1', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1', '0000:0000:0000:0000:0000:ffff:7f00:0001']) t.ok(isLoopbackAddress(address), address);
  for (const address of ['192.0.2.2', '10.0.0.1', '::', '::2', '::ffff:10.0.0.1', 'fd00::1', '64:ff9b::7f00:1', 'localhost', '']) t.notOk(isLoopbackAddress(address), address);
});
