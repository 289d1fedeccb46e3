import { createConnection, createServer, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A plain TCP load balancer for tests: it listens on an ephemeral loopback port and hands each
 * new connection to the next of its upstream ports in turn, piping bytes both ways. It knows
 * nothing of HTTP, so a keep-alive connection stays with the upstream that took it: a client
 * that wants its requests spread opens a connection per request.
 *
 * An upstream that refuses a connection (its process was killed) is marked down and skipped from
 * then on; the connection goes to the next one up, its bytes held until an upstream took it.
 */

export interface ProxiedConnection {
  /** Index (in the order added) of the upstream that took the connection. */
  readonly upstream: number;
  /** The client's port (its local port): which of the client's connections this is. */
  readonly clientPort: number;
  /** Resolves once both sides are closed. */
  readonly closed: Promise<void>;
}

export interface RoundRobinProxy {
  /** `http://127.0.0.1:PORT` */
  readonly origin: string;
  readonly port: number;
  /** Every connection an upstream took, in the order they were taken. */
  readonly connections: readonly ProxiedConnection[];
  /** The upstream that took the client's connection from `clientPort`. */
  upstreamOf(clientPort: number): number | undefined;
  /** Adds an upstream port; returns its index. */
  add(port: number): number;
  /** The next new connection goes to upstream `index` (if up); the turn goes on from there. */
  nextTo(index: number): void;
  /** Takes upstream `index` out of the turn (its process is gone) and cuts its open connections. */
  drop(index: number): void;
  /** Indexes of the upstreams still in the turn. */
  up(): number[];
  /** Stops listening and cuts every connection. */
  close(): Promise<void>;
}

export async function startRoundRobinProxy(): Promise<RoundRobinProxy> {
  const upstreams: Array<{ port: number; down: boolean; open: Set<Socket> }> = [];
  const connections: ProxiedConnection[] = [];
  const sockets = new Set<Socket>();
  let turn = 0;

  /** The next upstream in the turn that is not down, moving the turn past it. */
  function pick(): number | undefined {
    for (let tried = 0; tried < upstreams.length; tried++) {
      const index = turn % upstreams.length;
      turn = index + 1;
      if (!upstreams[index]!.down) return index;
    }
    return undefined;
  }

  /** Joins `client` to the next upstream up; one that refuses is marked down and the next tried. */
  function connect(client: Socket): void {
    const index = pick();
    if (index === undefined) return void client.destroy();
    const target = upstreams[index]!;
    const upstream = createConnection({ host: '127.0.0.1', port: target.port });
    sockets.add(upstream);
    upstream.once('error', () => {
      sockets.delete(upstream);
      target.down = true;
      if (!client.destroyed) connect(client);
    });
    upstream.once('connect', () => {
      upstream.removeAllListeners('error');
      target.open.add(upstream);
      const closed = Promise.all([once(client), once(upstream)]).then(() => {
        target.open.delete(upstream);
        sockets.delete(upstream);
      });
      connections.push({ upstream: index, clientPort: client.remotePort!, closed });
      client.pipe(upstream);
      upstream.pipe(client);
      // A side that failed takes the other down at once; one that ended has had its bytes piped
      // on, and the other side's end follows through the pipe.
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', (hadError) => (hadError ? client.destroy() : client.end()));
      client.resume();
    });
  }

  const server = createServer({ pauseOnConnect: true }, (client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    connect(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    connections,
    upstreamOf: (clientPort) => connections.findLast((connection) => connection.clientPort === clientPort)?.upstream,
    add(upstreamPort) {
      upstreams.push({ port: upstreamPort, down: false, open: new Set() });
      return upstreams.length - 1;
    },
    nextTo(index) {
      turn = index;
    },
    drop(index) {
      const target = upstreams[index]!;
      target.down = true;
      for (const socket of target.open) socket.destroy();
    },
    up: () => upstreams.flatMap((upstream, index) => (upstream.down ? [] : [index])),
    close() {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function once(socket: Socket): Promise<void> {
  return socket.closed ? Promise.resolve() : new Promise((resolve) => socket.once('close', () => resolve()));
}
