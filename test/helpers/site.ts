import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';
import { Conditions } from './conditions.js';

/**
 * A small website on an ephemeral loopback port for crawling tests. Each route is a function
 * returning status, content type and body; every request is recorded.
 */
export type Page = {
  status?: number;
  type?: string;
  body?: string | Buffer;
  headers?: Record<string, string>;
  delayMs?: number;
  /** The response is held until this settles (a request kept in flight while the test acts). */
  heldUntil?: Promise<unknown>;
};

export interface TestSite {
  readonly origin: string;
  readonly requests: string[];
  route(path: string, page: Page | ((req: IncomingMessage) => Page)): void;
  /** Resolves once a request for `path` (query aside) has arrived; at once if one has. */
  requested(path: string): Promise<void>;
}

export async function startSite(t: Test): Promise<TestSite> {
  const routes = new Map<string, Page | ((req: IncomingMessage) => Page)>();
  const requests: string[] = [];
  const arrivals = new Conditions();
  const pathOf = (url: string) => url.split('?')[0]!;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests.push(req.url ?? '');
    arrivals.changed();
    const entry = routes.get(pathOf(req.url ?? ''));
    const page = typeof entry === 'function' ? entry(req) : entry ?? { status: 404, type: 'text/plain', body: 'not found' };
    const send = () => {
      res.writeHead(page.status ?? 200, { 'content-type': page.type ?? 'text/html; charset=utf-8', ...page.headers });
      res.end(page.body ?? '');
    };
    if (page.heldUntil) void page.heldUntil.finally(send);
    else if (page.delayMs) setTimeout(send, page.delayMs).unref();
    else send();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // Requests still held (a page that never answers) are cut, not waited for.
  t.teardown(() => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections())));
  server.unref();
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    route(path, page) {
      routes.set(path, page);
    },
    requested(path) {
      return arrivals.until(() => requests.some((url) => pathOf(url) === path));
    },
  };
}

export const html = (title: string, body: string) => `<!doctype html><html><head><title>${title}</title><style>p{}</style></head><body>${body}</body></html>`;

/**
 * A webhook receiver at `path`: the JSON bodies it was sent, in order of arrival. It answers 200
 * once a body is read and kept, so a delivery the sender saw succeed is always in the list.
 */
export function jsonReceiver(site: TestSite, path: string): Array<Record<string, unknown>> {
  const received: Array<Record<string, unknown>> = [];
  site.route(path, (req) => {
    const kept = new Promise<void>((resolve) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        received.push(JSON.parse(body) as Record<string, unknown>);
        resolve();
      });
    });
    return { status: 200, type: 'text/plain', body: 'ok', heldUntil: kept };
  });
  return received;
}
