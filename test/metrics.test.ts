/**
 * GET /metrics (Prometheus text format):
 * 1. protected by METRICS_TOKEN when set (401 otherwise), open when not;
 * 2. HTTP durations by route pattern and status, event-loop lag, live conversations, open widget
 *    sockets, the document job queue and ledger debits by kind reflect what happened.
 */
import t from 'tap';
import WebSocket from 'ws';
import { ADMIN_TOKEN, startTestPlatform } from './helpers/platform.js';

t.test('metrics', async (t) => {
  const api = await startTestPlatform(t, { metricsToken: 'scrape-token-123' });
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

  const open = await startTestPlatform(t, { metricsToken: undefined });
  t.equal((await open.request('GET', '//metrics')).status, 200, 'open without METRICS_TOKEN');
});
