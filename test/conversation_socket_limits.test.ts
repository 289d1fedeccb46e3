/**
 * Widget sockets share the REST operations' rate limits: socket messages count against the
 * caller's per-IP budget (120 a minute, bursts of 60), not the per-conversation one of 20, so
 * visitors behind one address can chat in several conversations at once; socket upgrades take
 * from the same budget and are refused with 429 once it is spent.
 */
import t from 'tap';
import WebSocket from 'ws';
import { startTestPlatform } from './helpers/platform.js';
import { pingPong } from '../runtime/calls/carriers/loopback.js';
import { closed, opened } from './helpers/socket.js';

const api = await startTestPlatform(t);
const owner = await api.user();
const bot = await api.assistant(owner.token);
const wsUrl = (id: string) => `${api.origin.replace('http', 'ws')}/ws/conversations/${id}`;

async function open(id: string): Promise<{ socket: WebSocket; reply(text: string): Promise<any> }> {
  const socket = new WebSocket(wsUrl(id));
  await opened(t, socket);
  return {
    socket,
    reply: (text) =>
      new Promise((resolve) => {
        const listener = (data: WebSocket.RawData) => {
          const frame = JSON.parse(data.toString());
          if (frame.type === 'error' || (frame.type === 'message' && frame.role === 'assistant')) {
            socket.off('message', listener);
            resolve(frame);
          }
        };
        socket.on('message', listener);
        socket.send(JSON.stringify({ type: 'message', text }));
      }),
  };
}

t.test('three conversations from one address, four messages each, over sockets', async (t) => {
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await api.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id);
  const sockets = await Promise.all(ids.map(open));
  for (let round = 0; round < 4; round++) {
    for (const socket of sockets) t.match(await socket.reply(`Message ${round}`), { type: 'message', role: 'assistant' });
  }
});

t.test('at most 16 sockets on one conversation; every one of them gets each event', async (t) => {
  const id = (await api.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const widgetSockets = async () => Number(/^open_sockets\{kind="widget"\} (\d+)$/m.exec(String((await api.request('GET', '//metrics')).body))?.[1] ?? 0);
  const elsewhere = await widgetSockets();
  let tabs: Array<Awaited<ReturnType<typeof open>>> = [];
  // Sixteen open, as the server counts them (a tab the loopback connection drops now and then is opened again).
  for (let tries = 0; tries < 40 && (tabs.length < 16 || (await widgetSockets()) - elsewhere < 16); tries++) {
    tabs = tabs.filter(({ socket }) => socket.readyState === WebSocket.OPEN);
    if (tabs.length < 16) tabs.push(await open(id));
  }
  t.equal((await widgetSockets()) - elsewhere, 16);
  // Refused as it asks (429), or, when its check ran before the sixteenth's open was counted, closed
  // at once with 1013 and the same words.
  const refused = await new Promise<{ status: number; body: string }>((resolve) => {
    const socket = new WebSocket(wsUrl(id));
    socket.once('close', (code, reason) => resolve({ status: code, body: JSON.stringify({ status: false, error: reason.toString() }) }));
    socket.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    socket.once('error', () => undefined);
  });
  t.ok(refused.status === 429 || refused.status === 1013, `refused: ${refused.status}`);
  t.same(JSON.parse(refused.body), { status: false, error: 'Too many connections to this conversation. Close one and try again.' });

  const heard = tabs.slice(1).map(({ socket }) => new Promise<any>((resolve) => socket.on('message', (data) => {
    const event = JSON.parse(data.toString());
    if (event.type === 'message' && event.role === 'assistant') resolve(event);
  })));
  const reply = await tabs[0]!.reply('Hello from the first tab');
  const others = await Promise.all(heard);
  t.ok(others.every((event) => event.content === reply.content), 'the other 15 tabs got the same reply');

  const closed = new Promise((resolve) => tabs[0]!.socket.once('close', resolve));
  tabs[0]!.socket.close();
  await closed;
  // The server may take the close a moment after the client sees it: a few tries.
  let reopened = 0;
  for (let attempt = 0; attempt < 10 && reopened !== 101; attempt++) {
    const socket = new WebSocket(wsUrl(id));
    reopened = await new Promise<number>((resolve) => {
      socket.once('open', () => (socket.close(), resolve(101)));
      socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      socket.once('error', () => undefined);
    });
  }
  t.equal(reopened, 101, 'a tab closed makes room for another');
  for (const { socket } of tabs.slice(1)) socket.close();
});

t.test('upgrades take from the per-IP budget', async (t) => {
  const id = (await api.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const statuses: number[] = [];
  for (let i = 0; i < 80 && !statuses.includes(429); i++) {
    statuses.push(
      await new Promise<number>((resolve) => {
        const socket = new WebSocket(wsUrl(id));
        socket.once('open', () => (socket.close(), resolve(101)));
        socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        socket.once('error', () => undefined);
      }),
    );
  }
  t.ok(statuses.filter((s) => s === 101).length > 10, 'many upgrades first');
  t.equal(statuses.at(-1), 429, 'then refused once the budget is spent');
});

t.test('sockets refused as one too many are not counted: after a burst, the conversation takes 16 again; the id is counted in any case', async (t) => {
  const fresh = await startTestPlatform(t);
  const owner = await fresh.user();
  const bot = await fresh.assistant(owner.token);
  const id = (await fresh.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
  const connect = (path: string) =>
    new Promise<{ socket: WebSocket; open: boolean }>((resolve) => {
      const socket = new WebSocket(`${fresh.origin.replace('http', 'ws')}/ws/conversations/${path}`);
      socket.once('open', () => resolve({ socket, open: true }));
      socket.once('unexpected-response', () => resolve({ socket, open: false }));
      socket.once('error', () => undefined);
    });
  const widgetSockets = async () => Number(/^open_sockets\{kind="widget"\} (\d+)$/m.exec(String((await fresh.request('GET', '//metrics')).body))?.[1] ?? 0);
  const stillOpen = async (results: Array<{ socket: WebSocket; open: boolean }>) => {
    // Those let in past the check at once are closed (1013) just after opening: their close frame
    // comes before the answer to a ping sent now.
    await Promise.all(results.filter((r) => r.open).map((r) => pingPong(r.socket)));
    return results.filter((r) => r.open && r.socket.readyState === WebSocket.OPEN).length;
  };
  for (const round of [1, 2]) {
    // Half of them by the id in capitals: the same conversation.
    const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => connect(i % 2 ? id.toUpperCase() : id)));
    t.equal(await stillOpen(burst), 16, `burst ${round}: 16 stay open`);
    t.equal(await widgetSockets(), 16, 'and 16 are counted');
    // Until the server has seen every close.
    await Promise.all(burst.map((r) => closed(r.socket)));
    t.equal(await widgetSockets(), 0);
  }
});
