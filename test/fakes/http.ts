import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';

/**
 * Serves a vendor's fake on an ephemeral port of 127.0.0.1 until the test ends: `handle` gets each
 * request once its whole body (`raw`, as text) has arrived. @returns the server's origin.
 */
export async function serveFake(t: Test, handle: (req: IncomingMessage, res: ServerResponse, raw: string) => void): Promise<string> {
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    req.on('end', () => handle(req, res, raw));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  server.unref();
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * Listens with a fake's server (HTTP and its WebSocket server's clients) on an ephemeral port of
 * 127.0.0.1 until the test ends, when its sockets are cut and it closes. @returns the server's origin.
 */
export async function listenFake(t: Test, server: Server, sockets: { clients: Set<{ terminate(): void }> }): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const client of sockets.clients) client.terminate();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  server.unref();
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
