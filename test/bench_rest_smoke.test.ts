/**
 * The REST benchmark script (`npm run bench:rest`), for a moment at tiny sizes, so it cannot rot.
 * It starts a server, the Fastify baseline and a load process of its own, and registers 40 users
 * (scrypt each): on a loaded 2-core machine that takes over a minute, so it has a file to itself.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { freshDatabase } from './helpers/database.js';

const run = promisify(execFile);

t.test('REST benchmark script', async (t) => {
  const env = { ...process.env, DATABASE_URL: await freshDatabase(), LOG_LEVEL: 'silent' };
  const rest = await run(process.execPath, ['--import', 'tsx', 'bench/rest.ts', '1', '0', '1'], { env, timeout: 150_000 });
  t.match(rest.stdout, /\| GET \/user\/assistants\/languages \| platform \| \d+ \|/);
  t.match(rest.stdout, /\| GET \/user\/assistant\/\{id\} \| Fastify baseline \| \d+ \|/);
});
