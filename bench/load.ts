import autocannon from 'autocannon';

/**
 * The client side of the REST benchmark, in its own process so that sending requests and parsing
 * responses (as much work per request as a fast server's) does not share a core with the server it
 * measures. The parent sends `{run: LoadRun}` and gets `{result: LoadResult}` back.
 */

export const OPERATIONS = ['GET /user/assistants/languages', 'GET /user/assistant/{id}', 'POST /user/tools + DELETE'] as const;
export type Operation = (typeof OPERATIONS)[number];

export interface LoadRun {
  readonly operation: Operation;
  readonly origin: string;
  readonly seconds: number;
  readonly connections: number;
  /** One user per connection for the writes, so the plan-limit lock of one user does not serialise them; the reads use the first. */
  readonly tokens: readonly string[];
  readonly assistantId: number;
}

export interface LoadResult {
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
}

// A public address literal: the outbound guard classifies it without asking DNS at creation, so the
// benchmark measures the server, not the name server's latency.
const tool = JSON.stringify({ name: 'check_order', description: 'Looks up an order', endpoint: 'https://93.184.216.34/orders', method: 'GET', timeout: 5, schema: [{ name: 'order_id', type: 'string', description: 'The order id' }] });

function options(run: LoadRun): autocannon.Options {
  const auth = { authorization: `Bearer ${run.tokens[0]}` };
  const base = { connections: run.connections, duration: run.seconds };
  switch (run.operation) {
    case 'GET /user/assistants/languages':
      return { ...base, url: `${run.origin}/api/user/assistants/languages`, headers: auth };
    case 'GET /user/assistant/{id}':
      return { ...base, url: `${run.origin}/api/user/assistant/${run.assistantId}`, headers: auth };
    case 'POST /user/tools + DELETE': {
      let next = 0;
      return {
        ...base,
        url: run.origin,
        requests: [
          {
            method: 'POST',
            path: '/api/user/tools',
            body: tool,
            setupRequest: (request: any, context: any) => {
              context.token ??= run.tokens[next++ % run.tokens.length];
              return { ...request, headers: { 'content-type': 'application/json', authorization: `Bearer ${context.token}` } };
            },
            onResponse: (_status: number, body: string, context: any) => {
              context.toolId = JSON.parse(body)?.data?.id;
            },
          },
          {
            method: 'DELETE',
            setupRequest: (request: any, context: any) => ({ ...request, path: `/api/user/tools/${context.toolId}`, headers: { authorization: `Bearer ${context.token}` } }),
          },
        ],
      } as autocannon.Options;
    }
  }
}

process.on('message', async (message: { run?: LoadRun }) => {
  if (!message.run) return;
  const result = await autocannon(options(message.run));
  const reply: LoadResult = {
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
  process.send!({ result: reply });
});
process.on('disconnect', () => process.exit(0));
