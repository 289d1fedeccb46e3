import { KNOWLEDGE_MARKER, SEARCH_FUNCTION } from '../agent/knowledge.js';
import { EXTRACTION_FIELDS_MARKER } from '../agent/prompts.js';
import { answerFrom, argumentsFor, resultText, SMALL_TALK_REPLIES, smallTalk } from './devText.js';
import type { LlmEvent, LlmProvider } from './types.js';

/**
 * The development model: deterministic, no network, no key. It is named `dev` in the catalog and
 * in logs, and never stands in for a configured provider that fails. It answers in plain text
 * (see `devText.ts`):
 * - A user message that names a function (e.g. "check_order") calls it, with arguments picked from
 *   the message by the names and types of its parameters.
 * - A greeting, thanks or goodbye alone gets a short reply of its kind.
 * - `search_knowledgebase` is called for any other message when it is offered.
 * - After function results it says what they hold: the sentences of the best passage that answer
 *   the question, an error, or the result's facts.
 * - With knowledge in the system prompt it answers with the best passage's sentences.
 * - An instruction at the end (a system message: a call's re-engagement or goodbye) gets a short
 *   spoken line: a goodbye when it asks for one, else a check that the caller is still there.
 * - In JSON mode with an extraction schema (`Fields: [...]` in the system prompt) it fills each
 *   field from the text: the first number for numbers, yes/no words for booleans, the last line
 *   of the user for strings.
 * - Otherwise it acknowledges the message.
 */

/** A function's result as the platform sent it (JSON), or its text when it is not JSON. */
function parseResult(content: string | null): unknown {
  try {
    return JSON.parse(content ?? 'null');
  } catch {
    return content;
  }
}

function words(text: string): LlmEvent[] {
  return text.split(/(?<= )/).map((delta) => ({ type: 'text' as const, delta }));
}

export function createDevProvider(): LlmProvider {
  let calls = 0;
  return {
    name: 'dev',
    async *stream({ messages, functions, json }) {
      const last = messages[messages.length - 1];
      if (!last) return;
      const system = messages.find((m) => m.role === 'system')?.content ?? '';
      if (json && system.includes(EXTRACTION_FIELDS_MARKER)) {
        const fields = JSON.parse(system.slice(system.indexOf(EXTRACTION_FIELDS_MARKER) + EXTRACTION_FIELDS_MARKER.length).split('\n')[0]!) as Array<{ name: string; type: string }>;
        const text = last.content ?? '';
        const users = text.split('\n').filter((line) => line.startsWith('user: ')).map((line) => line.slice(6));
        const out: Record<string, unknown> = {};
        for (const field of fields) {
          if (field.type === 'number') out[field.name] = Number(/-?\d+(?:\.\d+)?/.exec(users.join(' '))?.[0] ?? NaN) || null;
          else if (field.type === 'bool') out[field.name] = /\b(yes|yeah|sure|interested)\b/i.test(users.join(' ')) ? true : /\b(no|not)\b/i.test(users.join(' ')) ? false : null;
          else out[field.name] = users.at(-1) ?? null;
        }
        yield { type: 'text', delta: JSON.stringify(out) };
        return;
      }
      if (last.role === 'tool') {
        const results: unknown[] = [];
        let i = messages.length - 1;
        for (; i >= 0 && messages[i]!.role === 'tool'; i--) results.unshift(parseResult(messages[i]!.content));
        const question = messages.slice(0, i).findLast((m) => m.role === 'user')?.content ?? '';
        yield* words(results.map((result) => resultText(result, question)).filter(Boolean).join(' ') || 'Done.');
        return;
      }
      if (last.role === 'system') {
        yield* words(/goodbye/i.test(last.content ?? '') ? 'Thank you for calling. Goodbye.' : 'Are you still there?');
        return;
      }
      const text = last.content ?? '';
      const lower = text.toLowerCase();
      const named = functions.find((fn) => fn.name !== SEARCH_FUNCTION.name && (lower.includes(fn.name) || lower.includes(fn.name.replace(/_/g, ' '))));
      const search = functions.find((fn) => fn.name === SEARCH_FUNCTION.name);
      const talk = named ? undefined : smallTalk(text);
      if (talk) {
        yield* words(SMALL_TALK_REPLIES[talk]);
        return;
      }
      const chosen = named ?? search;
      if (chosen) {
        calls++;
        const args = chosen === search && !named ? { query: text } : argumentsFor(chosen, text);
        yield { type: 'tool_calls', calls: [{ id: `call_dev_${calls}`, name: chosen.name, arguments: JSON.stringify(args) }] };
        return;
      }
      const knowledge = system.indexOf(KNOWLEDGE_MARKER);
      if (knowledge !== -1) {
        const passage = system.slice(knowledge + KNOWLEDGE_MARKER.length).split(/\n\[\d+\] /)[1]?.split('\n[')[0]?.trim();
        const answer = passage ? answerFrom(passage, text) : '';
        if (answer) {
          yield* words(answer);
          return;
        }
      }
      yield* words(`Thanks for your message. You wrote: "${text}"`);
    },
  };
}
