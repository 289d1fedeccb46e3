import pg from 'pg';
import type { Logger } from '../logger.js';

export interface Listener {
  close(): Promise<void>;
}

/**
 * LISTEN on one PostgreSQL channel, over a connection of its own: a notification goes only to the
 * session that listens, and pooled connections are shared. A lost connection is opened again after
 * 1 s, doubling up to 30 s; `listening` runs each time the channel is listened to (again), so the
 * caller can catch up on what was notified while it was not.
 */
export function listenTo(
  databaseUrl: string,
  channel: string,
  handlers: { notified(payload: string): void; listening?(): void },
  logger: Logger,
): Listener {
  let current: pg.Client | undefined;
  let closed = false;
  let retryMs = 1_000;
  let retry: NodeJS.Timeout | undefined;
  const dropped = new WeakSet<pg.Client>();

  const drop = (client: pg.Client, error?: unknown) => {
    if (dropped.has(client)) return;
    dropped.add(client);
    if (current === client) current = undefined;
    client.end().catch(() => undefined);
    if (closed) return;
    logger.warn({ err: error, channel, retryMs }, 'the notification connection was lost; opening it again');
    retry = setTimeout(() => {
      retry = undefined;
      void connect();
    }, retryMs);
    retry.unref();
    retryMs = Math.min(retryMs * 2, 30_000);
  };

  async function connect(): Promise<void> {
    // TCP keep-alive: a connection that died without a word (a NAT, a proxy) is noticed and opened again.
    const client = new pg.Client({ connectionString: databaseUrl, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
    client.on('error', (error) => drop(client, error));
    client.on('end', () => drop(client));
    client.on('notification', (message) => {
      if (message.channel !== channel || !message.payload) return;
      try {
        handlers.notified(message.payload);
      } catch (error) {
        logger.error({ err: error, channel }, 'a notification could not be handled');
      }
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
    } catch (error) {
      drop(client, error);
      return;
    }
    if (closed || dropped.has(client)) {
      if (!dropped.has(client)) await client.end().catch(() => undefined);
      return;
    }
    current = client;
    retryMs = 1_000;
    handlers.listening?.();
  }

  void connect();
  return {
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      const client = current;
      current = undefined;
      if (client) {
        dropped.add(client);
        await client.end().catch(() => undefined);
      }
    },
  };
}
