/**
 * Widget sockets share the REST operations' rate limits: socket messages count against the
 * caller's per-IP budget (120 a minute, bursts of 60), not the per-conversation one of 20, so
 * visitors behind one address can chat in several conversations at once; socket upgrades take
 * from the same budget and are refused with 429 once it is spent.
 */
import t from 'tap';
import WebSocket from 'ws';
import { startTestPlatform } from './helpers/platform.js';
import { opened } from './helpers/socket.js';

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
  for (let i = 0; i < 3; i++) ids.push((await api.request('POST', '/conversations', { body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id);
  const sockets = await Promise.all(ids.map(open));
  for (let round = 0; round < 4; round++) {
    for (const socket of sockets) t.match(await socket.reply(`Message ${round}`), { type: 'message', role: 'assistant' });
  }
});

t.test('upgrades take from the per-IP budget', async (t) => {
  const id = (await api.request('POST', '/conversations', { body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
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
