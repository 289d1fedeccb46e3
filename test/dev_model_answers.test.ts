import t, { type Test } from 'tap';
import { startSite } from './helpers/site.js';
import { startTestPlatform } from './helpers/platform.js';

/**
 * The `dev` model's answers over the real chat API, as a newcomer without keys reads them:
 * 1. A knowledge question (function_call mode) is answered with the best passage's sentences as
 *    plain text: no JSON, no escapes, no markup, cut at a sentence, at most 320 characters.
 * 2. Knowledge in the prompt (prompt mode) is answered the same way.
 * 3. "Thanks!", "Hello" and "Bye" get short natural replies, and no knowledge search.
 * 4. A tool named in the message is called with arguments picked by its schema's names and types
 *    (an email, a date, a number, a name), not the whole message; its result is read out plainly.
 */

const site = await startSite(t);
site.route('/book', (req) => {
  const query = new URL(req.url!, 'http://x').searchParams;
  return { type: 'application/json', body: JSON.stringify({ ok: true, booking_reference: 'BK-7', guests: Number(query.get('guests')) }) };
});
const api = await startTestPlatform(t, { outboundAllowPrivate: true });
const owner = await api.user('Owner');
await api.credit(owner.id, 10);

const LONG_DOCUMENT = [
  '# Delivery and returns',
  '',
  'We ship to every country in the European Union. **Standard delivery** takes three to five working days, and express delivery arrives the next working day when ordered before 2 pm.',
  '',
  'Returns are accepted within 30 days of delivery. Items must be unused and in their original packaging. We refund the full price to the original payment method within five days of receiving the return. Shipping costs of a return are paid by the customer unless the item arrived damaged, in which case we send a prepaid label.',
  '',
  '| Store | Opens |',
  '| Berlin | 8 am |',
].join('\n');

async function knowledgebase(): Promise<number> {
  const kb = (await api.request('POST', '/user/knowledgebases', { token: owner.token, body: { name: 'Policies' } })).body.data.id;
  const form = new FormData();
  form.set('name', 'Delivery and returns');
  form.set('type', 'txt');
  form.set('file', new Blob([LONG_DOCUMENT]), 'policies.txt');
  await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: owner.token, raw: form });
  await api.platform.runtime.settled();
  return kb;
}

async function conversation(fields: Record<string, unknown>): Promise<string> {
  const bot = await api.assistant(owner.token, { llm_model_id: 6, ...fields });
  return (await api.request('POST', '/conversations', { token: owner.token, body: { assistant_id: bot.uuid, type: 'test' } })).body.conversation_id as string;
}

const say = (id: string, message: string) => api.request('POST', `/conversations/${id}/messages`, { token: owner.token, body: { message } });

/** Plain spoken text: no JSON, escapes or markup, whole sentences, a sensible length. */
function assertPlain(t: Test, text: string): void {
  t.notMatch(text, /[{}[\]"\\|*#]/, `no JSON, escapes or markup: ${text}`);
  t.notMatch(text, /passages|content|source/, 'no field names');
  t.match(text, /[.!?]$/, 'ends at a sentence');
  t.ok(text.length > 0 && text.length <= 320, `a sensible length (${text.length})`);
}

const kb = await knowledgebase();

t.test('a knowledge question is answered with the sentences of the best passage', async (t) => {
  const id = await conversation({ knowledgebase_id: kb, knowledgebase_mode: 'function_call' });
  const reply = await say(id, 'Who pays the shipping costs of a return?');
  t.equal(reply.status, 200);
  t.equal(reply.body.function_calls[0].name, 'search_knowledgebase');
  t.equal(reply.body.function_calls[0].arguments.query, 'Who pays the shipping costs of a return?');
  assertPlain(t, reply.body.message);
  t.match(reply.body.message, /^Shipping costs of a return are paid by the customer unless the item arrived damaged, in which case we send a prepaid label\./, 'the sentence that answers comes first');
});

t.test('knowledge in the prompt is answered the same way', async (t) => {
  const id = await conversation({ knowledgebase_id: kb, knowledgebase_mode: 'prompt' });
  const reply = await say(id, 'How long does express delivery take?');
  t.same(reply.body.function_calls, []);
  assertPlain(t, reply.body.message);
  t.match(reply.body.message, /^Standard delivery takes three to five working days, and express delivery arrives the next working day when ordered before 2 pm\./);
});

t.test('small talk gets a short natural reply and no search', async (t) => {
  const id = await conversation({ knowledgebase_id: kb, knowledgebase_mode: 'function_call' });
  const thanks = await say(id, 'Thanks!');
  t.equal(thanks.body.message, "You're welcome! Is there anything else I can help you with?");
  t.same(thanks.body.function_calls, [], 'no knowledge search for a thank-you');
  t.equal((await say(id, 'Hello')).body.message, 'Hello! How can I help you today?');
  t.equal((await say(id, 'Bye!')).body.message, 'Goodbye, and have a nice day!');
  const question = await say(id, 'Hello, do you ship to Spain?');
  t.equal(question.body.function_calls[0]?.name, 'search_knowledgebase', 'a question that opens with a greeting is still a question');
});

t.test("a named tool gets its arguments by its schema's names and types", async (t) => {
  const tool = await api.request('POST', '/user/tools', {
    token: owner.token,
    body: {
      name: 'book_table',
      description: 'Books a table',
      endpoint: `${site.origin}/book`,
      method: 'GET',
      timeout: 5,
      schema: [
        { name: 'customer_name', type: 'string', description: 'Who the table is for' },
        { name: 'email', type: 'string', description: 'Where the confirmation goes' },
        { name: 'date', type: 'string', description: 'Day of the visit, YYYY-MM-DD' },
        { name: 'guests', type: 'number', description: 'How many people' },
      ],
    },
  });
  t.equal(tool.status, 201);
  const id = await conversation({ tool_ids: [tool.body.data.id] });
  const reply = await say(id, 'Please book table for Ada Lovelace on 2026-12-01 for 4 guests, confirmation to ada@example.com.');
  t.equal(reply.body.function_calls[0].name, 'book_table');
  t.same(reply.body.function_calls[0].arguments, { customer_name: 'Ada Lovelace', email: 'ada@example.com', date: '2026-12-01', guests: 4 }, 'arguments picked by name and type');
  const request = new URL(site.requests.at(-1)!, 'http://x').searchParams;
  t.equal(request.get('email'), 'ada@example.com', 'the tool received the email alone');
  assertPlain(t, reply.body.message);
  t.equal(reply.body.message, 'booking reference: BK-7; guests: 4.');
});
