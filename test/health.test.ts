/**
 * Health:
 * 1. GET /health is 200 {status: "ok"} while the database answers (no authentication).
 * 2. it is 503 once the database refuses connections, and 200 again when it is back.
 */
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);

t.test('healthy', async (t) => {
  const res = await api.request('GET', '//health');
  t.equal(res.status, 200);
  t.same(res.body, { status: 'ok' });
});

t.test('unhealthy while the database is unreachable', async (t) => {
  const name = new URL(api.databaseUrl).pathname.slice(1);
  const admin = new URL(api.databaseUrl);
  admin.pathname = '/postgres';
  const setConnections = (allow: boolean) =>
    withClient(admin.toString(), async (db) => {
      await db.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS ${allow}`);
      if (!allow) await db.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
    });
  await setConnections(false);
  const down = await api.request('GET', '//health');
  t.equal(down.status, 503);
  t.same(down.body, { status: 'unavailable' });
  await setConnections(true);
  const up = await api.request('GET', '//health');
  t.equal(up.status, 200);
});
