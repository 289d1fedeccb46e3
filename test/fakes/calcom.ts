import type { IncomingMessage } from 'node:http';
import type { Test } from 'tap';
import { serveFake } from './http.js';

/**
 * A local stand-in for the Cal.com v2 API: `GET /v2/me`, `GET /v2/slots` and `POST /v2/bookings`,
 * with bearer keys and `cal-api-version` headers checked as the real API does.
 */
export interface FakeCalcom {
  readonly origin: string;
  readonly requests: Array<{ method: string; path: string; headers: IncomingMessage['headers']; body: any }>;
}

export async function startFakeCalcom(t: Test, options: { apiKey: string; username: string; slots: Record<string, string[]> }): Promise<FakeCalcom> {
  const requests: FakeCalcom['requests'] = [];
  const origin = await serveFake(t, (req, res, raw) => {
    const url = new URL(req.url ?? '/', 'http://calcom');
    requests.push({ method: req.method ?? '', path: url.pathname + url.search, headers: req.headers, body: raw ? JSON.parse(raw) : undefined });
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.headers.authorization !== `Bearer ${options.apiKey}`) return send(401, { status: 'error', error: { code: 'UNAUTHORIZED', message: 'Invalid API key' } });
    if (!req.headers['cal-api-version']) return send(400, { status: 'error', error: { message: 'cal-api-version header required' } });
    if (req.method === 'GET' && url.pathname === '/v2/me') return send(200, { status: 'success', data: { id: 1, username: options.username, email: 'owner@example.com' } });
    if (req.method === 'GET' && url.pathname === '/v2/slots') {
      const start = url.searchParams.get('start') ?? '';
      return send(200, { status: 'success', data: { [start]: (options.slots[start] ?? []).map((time) => ({ start: time })) } });
    }
    if (req.method === 'POST' && url.pathname === '/v2/bookings') {
      const body = JSON.parse(raw) as { start: string };
      return send(201, { status: 'success', data: { id: 77, uid: 'booking-uid-77', start: body.start, status: 'accepted' } });
    }
    send(404, { status: 'error', error: { message: 'Not found' } });
  });
  return { origin: origin, requests };
}
