import type { FunctionDefinition } from '../llm/types.js';

/**
 * A knowledgebase in a model turn, in either of its modes: `function_call` offers the model
 * `search_knowledgebase`; `prompt` puts the best passages in the system prompt under
 * `KNOWLEDGE_MARKER` (which the dev model looks for to answer from them).
 */

export const SEARCH_FUNCTION: FunctionDefinition = {
  name: 'search_knowledgebase',
  description: 'Search the knowledge base for passages that answer the user. Use it for any question about the business, its products or policies.',
  parameters: { type: 'object', properties: { query: { type: 'string', description: 'What to look up, in a few words' } }, required: ['query'] },
};

/** Heads the passages in a system prompt; what follows it is `[1] passage` lines. */
export const KNOWLEDGE_MARKER = 'Relevant knowledge:';

/** Passages of a knowledgebase as a system prompt carries them (`knowledgebase_mode: prompt`); '' for none. */
export function knowledgeSection(passages: ReadonlyArray<{ readonly content: string }>): string {
  return passages.length === 0 ? '' : `${KNOWLEDGE_MARKER}\n${passages.map((p, i) => `[${i + 1}] ${p.content}`).join('\n')}`;
}
