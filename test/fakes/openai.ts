import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Test } from 'tap';
import { serveFake } from './http.js';
import { Conditions } from '../helpers/conditions.js';
import { embedLocal } from '../../workers/embed.js';

/**
 * A local stand-in for an OpenAI-compatible API, speaking its wire format. Embeddings are
 * deterministic (the local hashed vectors, scaled so callers must normalise). `failNext` makes the
 * next requests answer with the given status.
 */
export interface ScriptedReply {
  readonly text?: string;
  readonly toolCalls?: ReadonlyArray<{ readonly name: string; readonly arguments: Record<string, unknown> }>;
  /** Answer with this HTTP status instead (an error body). */
  readonly status?: number;
  /** Wait before answering. */
  readonly delayMs?: number;
  /** Answer only once this settles (a reply held back while the test moves simulated time). */
  readonly heldUntil?: Promise<unknown>;
  /** Stream the first word of the text, then the rest once this settles (a reply caught mid-stream). */
  readonly heldMidway?: Promise<unknown>;
}

export interface FakeOpenAi {
  /** e.g. `http://127.0.0.1:PORT/v1` */
  readonly baseUrl: string;
  readonly requests: Array<{ path: string; headers: IncomingMessage['headers']; body: any }>;
  /** Resolves once `count` requests have arrived (counting from the fake's start). */
  received(count: number): Promise<void>;
  failNext(status: number, times?: number): void;
  /** Replies of the next chat completions, in order; afterwards it answers "fake reply". */
  scriptChat(...replies: ScriptedReply[]): void;
}

/** Chat Completions streaming (server-sent events) as the OpenAI API writes it. */
async function streamChat(res: ServerResponse, model: string, reply: ScriptedReply): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  const base = { id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 1_700_000_000, model };
  const send = (delta: Record<string, unknown>, finish: string | null = null) =>
    res.write(`data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
  send({ role: 'assistant', content: '' });
  for (const [index, piece] of (reply.text ?? '').split(/(?<= )/).filter(Boolean).entries()) {
    if (index === 1 && reply.heldMidway) await reply.heldMidway;
    send({ content: piece });
  }
  (reply.toolCalls ?? []).forEach((call, index) => {
    const args = JSON.stringify(call.arguments);
    send({ tool_calls: [{ index, id: `call_${index}_${call.name}`, type: 'function', function: { name: call.name, arguments: '' } }] });
    send({ tool_calls: [{ index, function: { arguments: args.slice(0, Math.ceil(args.length / 2)) } }] });
    send({ tool_calls: [{ index, function: { arguments: args.slice(Math.ceil(args.length / 2)) } }] });
  });
  send({}, reply.toolCalls?.length ? 'tool_calls' : 'stop');
  res.end('data: [DONE]\n\n');
}

export async function startFakeOpenAi(t: Test): Promise<FakeOpenAi> {
  const requests: FakeOpenAi['requests'] = [];
  const failures: number[] = [];
  const script: ScriptedReply[] = [];
  const arrivals = new Conditions();
  const origin = await serveFake(t, (req, res, raw) => {
    const body = raw ? JSON.parse(raw) : undefined;
    requests.push({ path: req.url ?? '', headers: req.headers, body });
    arrivals.changed();
    const failure = failures.shift();
    if (failure !== undefined) {
      res.writeHead(failure, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'injected failure', type: 'server_error' } }));
      return;
    }
    if (req.url === '/v1/chat/completions') {
      const reply = script.shift() ?? { text: 'fake reply' };
      const answer = () => {
        if (reply.status) {
          res.writeHead(reply.status, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: { message: 'scripted failure', type: 'server_error' } }));
        } else void streamChat(res, body.model, reply);
      };
      if (reply.heldUntil) void reply.heldUntil.finally(answer);
      else if (reply.delayMs) setTimeout(answer, reply.delayMs);
      else answer();
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
  return {
    baseUrl: `${origin}/v1`,
    requests,
    received(count) {
      return arrivals.until(() => requests.length >= count);
    },
    failNext(status, times = 1) {
      for (let i = 0; i < times; i++) failures.push(status);
    },
    scriptChat(...replies) {
      script.push(...replies);
    },
  };
}
