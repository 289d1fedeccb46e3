import { KNOWLEDGE_MARKER, SEARCH_FUNCTION } from '../agent/knowledge.js';
import { EXTRACTION_FIELDS_MARKER } from '../agent/prompts.js';
import type { FunctionDefinition, LlmEvent, LlmProvider } from './types.js';

/**
 * The development model: deterministic, no network, no key. It is named `dev` in the catalog and
 * in logs, and never stands in for a configured provider that fails.
 * - A user message that names a function (e.g. "check_order") calls it, with arguments made from
 *   the message; `search_knowledgebase` is called for any other message when it is offered.
 * - After function results it answers with them.
 * - With knowledge in the system prompt it answers with the best passage.
 * - An instruction at the end (a system message: a call's re-engagement or goodbye) gets a short
 *   spoken line: a goodbye when it asks for one, else a check that the caller is still there.
 * - In JSON mode with an extraction schema (`Fields: [...]` in the system prompt) it fills each
 *   field from the text: the first number for numbers, yes/no words for booleans, the last line
 *   of the user for strings.
 * - Otherwise it acknowledges the message.
 */

function argumentsFor(fn: FunctionDefinition, message: string): Record<string, unknown> {
  const properties = (fn.parameters.properties ?? {}) as Record<string, { type?: string }>;
  const numbers = message.match(/-?\d+(?:\.\d+)?/g) ?? [];
  const args: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(properties)) {
    if (schema.type === 'number') args[name] = Number(numbers.shift() ?? 0);
    else if (schema.type === 'boolean') args[name] = !/\b(no|not|false)\b/i.test(message);
    else args[name] = message;
  }
  return args;
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
        const results: string[] = [];
        for (let i = messages.length - 1; i >= 0 && messages[i]!.role === 'tool'; i--) results.unshift(messages[i]!.content ?? '');
        yield* words(`Here is what I found: ${results.join(' ').slice(0, 600)}`);
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
        if (passage) {
          yield* words(`According to our documents: ${passage}`);
          return;
        }
      }
      yield* words(`Thanks for your message. You wrote: "${text}"`);
    },
  };
}
