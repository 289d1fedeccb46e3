import type { KnowledgeService } from '../knowledge/service.js';
import type { OutboundFetch } from '../net/outbound.js';
import type { ToolRow } from '../tools/repository.js';
import { callTool } from './httpTools.js';
import { SEARCH_FUNCTION } from './knowledge.js';

/**
 * Running a function the model called, in chat and in calls alike: a knowledge search or one of
 * the assistant's HTTP tools. (A call's built-in functions, such as transfers and DTMF, are the
 * voice engine's own.)
 */

/** The arguments a model wrote, as an object; anything that is not a JSON object becomes none. */
export function parseArguments(json: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(json || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // Arguments the model could not write as JSON reach the tool as none.
  }
  return {};
}

export interface FunctionContext {
  readonly ownerId: number;
  readonly tools: ReadonlyMap<string, ToolRow>;
  readonly knowledgebaseId: number | undefined;
  readonly knowledge: KnowledgeService;
  readonly outbound: OutboundFetch;
  /** What to search for when the model gave no query. */
  readonly fallbackQuery: string;
}

/** Runs a knowledge search or a mid-call tool; the model always gets a result, never an exception. */
export async function runFunction(name: string, args: Record<string, unknown>, context: FunctionContext): Promise<unknown> {
  if (name === SEARCH_FUNCTION.name && context.knowledgebaseId !== undefined) {
    const passages = await context.knowledge.search(context.ownerId, context.knowledgebaseId, String(args.query ?? context.fallbackQuery), 3).catch(() => []);
    return { passages: passages.map((p) => ({ content: p.content, source: p.source, document: p.document_name })) };
  }
  const tool = context.tools.get(name);
  return tool ? callTool(tool, args, context.outbound, context.ownerId) : { error: `There is no function named ${name}` };
}
