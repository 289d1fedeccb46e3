import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { freshDatabase } from './database.js';
import { startRoundRobinProxy, type RoundRobinProxy } from './roundRobinProxy.js';
import { descendants, killLeftovers, spawnServer, type ServerProcess } from './server_process.js';

/**
 * Several real server processes (`node --import tsx api/main.ts`) on loopback, as behind a load
 * balancer: one PostgreSQL database shared by all, a data directory and a port each, and a
 * round-robin TCP proxy in front whose origin is every process's PUBLIC_URL (so the stream URLs
 * and callback URLs the platform hands out come back through it). The processes start in
 * parallel; each is SIGKILLed, with everything it started, when the test ends, however it ends.
 */

export interface ClusterProcess extends ServerProcess {
  /** Index among the processes, which is also its upstream index at the proxy. */
  readonly index: number;
  /** `http://127.0.0.1:PORT`: the process itself, not through the proxy. */
  readonly origin: string;
  readonly port: number;
  readonly pid: number;
  readonly dataDir: string;
}

export interface ApiAnswer<T = any> {
  readonly status: number;
  readonly body: T;
  readonly headers: Record<string, string | string[] | undefined>;
}

export interface ServerCluster {
  readonly processes: readonly ClusterProcess[];
  readonly proxy: RoundRobinProxy;
  /** The proxy's origin, the processes' PUBLIC_URL. */
  readonly origin: string;
  readonly databaseUrl: string;
  /**
   * REST under `/api` through the proxy, JSON both ways, `token` as a bearer; each request on a
   * connection of its own, so consecutive requests go to consecutive processes. `to` sends it to
   * that process (still through the proxy; only while nothing else connects at the same time).
   * `upstream`: the process that answered.
   */
  api<T = any>(method: string, path: string, options?: { body?: unknown; token?: string; to?: number; form?: URLSearchParams | FormData; headers?: Record<string, string> }): Promise<ApiAnswer<T> & { upstream: number }>;
  /**
   * The process that opened the loopback connection whose port is `port` (a request one made to a
   * server of the test: the request's `socket.remotePort`), while that connection is open.
   */
  processOf(port: number): number | undefined;
  /** SIGKILLs process `index`, then takes it out of the proxy's turn; resolves once it is gone. */
  kill(index: number): Promise<void>;
}

export interface ServerClusterOptions {
  /** How many processes. @defaultValue 3 */
  readonly size?: number;
  /** Environment of every process, over the defaults (silent tone voice, info logs, PORT 0). */
  readonly env?: Readonly<Record<string, string>>;
}

/** One HTTP request on a connection of its own (no keep-alive pool): the proxy gives it the next process. */
export function requestOnce(url: string, init: { method: string; headers?: Record<string, string>; body?: string | Buffer }): Promise<ApiAnswer<string> & { clientPort: number }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(url, { method: init.method, headers: init.headers, agent: false }, (response) => {
      const clientPort = response.socket.localPort!;
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text, headers: response.headers, clientPort }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(init.body);
  });
}

/**
 * The one of `pids` holding the open TCP socket bound locally to `port` (Linux: the socket's inode
 * in /proc/net/tcp, found among each process's file descriptors).
 */
export function socketOwner(port: number, pids: readonly number[]): number | undefined {
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = new Set(
    readFileSync('/proc/net/tcp', 'utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((fields) => fields[1]?.endsWith(local))
      .map((fields) => `socket:[${fields[9]}]`),
  );
  for (const pid of pids) {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (inodes.has(readlinkSync(`/proc/${pid}/fd/${fd}`))) return pid;
      } catch {}
    }
  }
  return undefined;
}

export async function startServerCluster(t: Test, options: ServerClusterOptions = {}): Promise<ServerCluster> {
  const size = options.size ?? 3;
  const proxy = await startRoundRobinProxy();
  t.teardown(() => proxy.close());
  const databaseUrl = await freshDatabase();
  const spawned: ServerProcess[] = [];
  const dataDirs: string[] = [];
  const killAll = (): void => {
    for (const { child } of spawned) if (child.exitCode === null && child.signalCode === null) killLeftovers([...descendants(child.pid!), child.pid!]);
  };
  // Also when the test process dies of an uncaught error, when no teardown runs.
  process.once('exit', killAll);
  t.teardown(async () => {
    process.off('exit', killAll);
    killAll();
    await Promise.all(spawned.map((server) => server.exited));
    await Promise.all(dataDirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  const processes = await Promise.all(
    Array.from({ length: size }, async (_, index): Promise<Omit<ClusterProcess, 'index'>> => {
      const dataDir = await mkdtemp(join(tmpdir(), `ap-horizontal-${index}-`));
      dataDirs.push(dataDir);
      const server = spawnServer({ dataDir, env: { DATABASE_URL: databaseUrl, PUBLIC_URL: proxy.origin, HOST: '127.0.0.1', ...options.env } });
      spawned.push(server);
      const listening = await server.line('platform listening');
      const port = listening.port as number;
      return { ...server, origin: `http://127.0.0.1:${port}`, port, pid: listening.pid as number, dataDir };
    }),
  );
  // Added in index order once all listen, so upstream i is process i.
  const members: ClusterProcess[] = processes.map((process, index) => {
    proxy.add(process.port);
    return { ...process, index };
  });

  return {
    processes: members,
    proxy,
    origin: proxy.origin,
    databaseUrl,
    async api(method, path, { body, token, to, form, headers = {} } = {}) {
      // A form is sent as a browser sends it: URL-encoded, or multipart with its files.
      const encoded = form instanceof FormData ? new Response(form) : undefined;
      const [type, payload] =
        encoded ? [encoded.headers.get('content-type')!, Buffer.from(await encoded.arrayBuffer())]
        : form ? ['application/x-www-form-urlencoded', form.toString()]
        : body === undefined ? [undefined, undefined]
        : ['application/json', JSON.stringify(body)];
      if (to !== undefined) proxy.nextTo(to);
      const answer = await requestOnce(`${proxy.origin}/api${path}`, {
        method,
        headers: { ...(type ? { 'content-type': type } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
        body: payload,
      });
      const json = answer.body && String(answer.headers['content-type'] ?? '').includes('json');
      return { status: answer.status, headers: answer.headers, body: json ? JSON.parse(answer.body) : answer.body, upstream: proxy.upstreamOf(answer.clientPort) ?? -1 };
    },
    processOf(port) {
      const pid = socketOwner(port, members.map((member) => member.pid));
      return members.find((member) => member.pid === pid)?.index;
    },
    async kill(index) {
      const member = members[index]!;
      // Killed before the proxy lets go of it: its connections are cut by its death, not by the
      // proxy (which the process would take for callers hanging up).
      killLeftovers([...descendants(member.child.pid!), member.child.pid!]);
      await member.exited;
      proxy.drop(index);
    },
  };
}
