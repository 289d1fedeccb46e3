import type { ToolRow } from '../tools/repository.js';
import { OutboundError, type OutboundFetch } from '../net/outbound.js';
import type { FunctionDefinition } from '../llm/types.js';

/**
 * An assistant's HTTP tools as model functions (in chat and in calls), and their execution: a
 * call goes to the tool's endpoint with its method, headers and timeout (GET and DELETE carry the
 * arguments in the query string, others as a JSON body) through the outbound guard. The model gets
 * the JSON result, or text cut at 8 KB, or a description of what went wrong; never an exception.
 */

const RESULT_LIMIT = 8 * 1024;

/** An assistant's HTTP tool as the model sees it: every parameter of its schema is required. */
export function toolFunction(tool: ToolRow): FunctionDefinition {
  const properties: Record<string, unknown> = {};
  for (const item of tool.schema) properties[item.name] = { type: item.type, description: item.description };
  return { name: tool.name, description: tool.description, parameters: { type: 'object', properties, required: tool.schema.map((item) => item.name) } };
}

/** @param ownerId the tool's owner, named with the tool in the log when the guard refuses its endpoint. */
export async function callTool(tool: ToolRow, args: Record<string, unknown>, fetch: OutboundFetch, ownerId: number): Promise<unknown> {
  const headers: Record<string, string> = { 'user-agent': 'AssistantPlatform/1.0 (tool call)', accept: 'application/json, text/plain;q=0.9' };
  for (const header of tool.headers) headers[header.name] = header.value;
  let url = tool.endpoint;
  let body: string | undefined;
  if (tool.method === 'GET' || tool.method === 'DELETE') {
    const target = new URL(tool.endpoint);
    for (const [key, value] of Object.entries(args)) target.searchParams.set(key, typeof value === 'string' ? value : JSON.stringify(value));
    url = target.href;
  } else {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(args);
  }
  try {
    const response = await fetch(url, { method: tool.method, headers, body, timeoutMs: tool.timeout * 1000, maxBytes: RESULT_LIMIT, subject: { userId: ownerId, toolId: tool.id } });
    const text = response.body.toString('utf8');
    let result: unknown = text;
    if ((response.headers['content-type'] ?? '').includes('json') && !response.truncated) {
      try {
        result = JSON.parse(text);
      } catch {
        result = text;
      }
    }
    if (response.status < 200 || response.status >= 300) return { error: `The tool answered HTTP ${response.status}`, body: result };
    if (typeof result === 'string') return { text: result, ...(response.truncated ? { truncated: true } : {}) };
    // A function call's result is an object (spec 2.9): a JSON array, number or null is wrapped.
    return result !== null && typeof result === 'object' && !Array.isArray(result) ? result : { value: result };
  } catch (error) {
    const message = error instanceof OutboundError ? error.message : 'The tool could not be called.';
    return { error: /Timed out/.test(message) ? `The tool did not answer within ${tool.timeout} seconds` : message };
  }
}
