import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';
import { embedLocal } from '../../workers/embed.js';

/**
 * A local stand-in for an OpenAI-compatible API, speaking its wire format. Embeddings are
 * deterministic (the local hashed vectors, scaled so callers must normalise). `failNext` makes the
 * next requests answer with the given status.
 */
export interface FakeOpenAi {
  /** e.g. `http://127.0.0.1:PORT/v1` */
  readonly baseUrl: string;
  readonly requests: Array<{ path: string; headers: IncomingMessage['headers']; body: any }>;
  failNext(status: number, times?: number): void;
}

export async function startFakeOpenAi(t: Test): Promise<FakeOpenAi> {
  const requests: FakeOpenAi['requests'] = [];
  const failures: number[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : undefined;
      requests.push({ path: req.url ?? '', headers: req.headers, body });
      const failure = failures.shift();
      if (failure !== undefined) {
        res.writeHead(failure, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: 'injected failure', type: 'server_error' } }));
        return;
      }
      if (req.url === '/v1/embeddings') {
        const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
        // Returned out of order on purpose: clients must sort by `index`.
        const data = inputs.map((text, index) => ({ object: 'embedding', index, embedding: Array.from(embedLocal(text), (v) => v * 3) })).reverse();
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: inputs.length, total_tokens: inputs.length } }));
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not found' } }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    failNext(status, times = 1) {
      for (let i = 0; i < times; i++) failures.push(status);
    },
  };
}
