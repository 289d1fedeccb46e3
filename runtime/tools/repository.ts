import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import type { ToolHeader, ToolInput, ToolParameter } from '../../schemas/tools.js';

export const toolRow = z.object({
  id: z.number(),
  name: z.string(),
  description: z.string(),
  endpoint: z.string(),
  method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']),
  timeout: z.number(),
  headers: z.array(z.object({ name: z.string(), value: z.string() })),
  schema: z.array(z.object({ name: z.string(), type: z.enum(['string', 'number', 'boolean']), description: z.string() })),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ToolRow = z.infer<typeof toolRow>;

const toolColumns = sql.fragment`id, name, description, endpoint, method, timeout, headers, schema, created_at, updated_at`;

/** Locks the user row so concurrent creations count tools one at a time (plan limit). */
export async function lockUserPlan(db: CommonQueryMethods, userId: number): Promise<{ plan: 'free' | 'pro'; tools: number }> {
  const plan = await db.oneFirst(sql.type(z.object({ plan: z.enum(['free', 'pro']) }))`SELECT plan FROM users WHERE id = ${userId} FOR UPDATE`);
  const tools = await db.oneFirst(sql.type(z.object({ n: z.number() }))`SELECT count(*)::int AS n FROM tools WHERE user_id = ${userId}`);
  return { plan, tools };
}

export async function insertTool(db: CommonQueryMethods, userId: number, input: ToolInput): Promise<ToolRow> {
  return db.one(sql.type(toolRow)`
    INSERT INTO tools (user_id, name, description, endpoint, method, timeout, headers, schema)
    VALUES (${userId}, ${input.name}, ${input.description}, ${input.endpoint}, ${input.method}, ${input.timeout ?? 10},
      ${sql.jsonb((input.headers ?? []) as never)}, ${sql.jsonb((input.schema ?? []) as never)})
    RETURNING ${toolColumns}`);
}

export async function findTool(db: CommonQueryMethods, userId: number, id: number): Promise<ToolRow | null> {
  return db.maybeOne(sql.type(toolRow)`SELECT ${toolColumns} FROM tools WHERE id = ${id} AND user_id = ${userId}`);
}

export async function listTools(db: CommonQueryMethods, userId: number): Promise<readonly ToolRow[]> {
  return db.any(sql.type(toolRow)`SELECT ${toolColumns} FROM tools WHERE user_id = ${userId} ORDER BY id`);
}

/** Partial update: absent fields keep their value; `headers` and `schema` replace. */
export async function updateTool(db: CommonQueryMethods, userId: number, id: number, input: Partial<ToolInput>): Promise<ToolRow | null> {
  const jsonOrNull = (value: ToolHeader[] | ToolParameter[] | undefined) => (value === undefined ? null : sql.jsonb(value as never));
  return db.maybeOne(sql.type(toolRow)`
    UPDATE tools SET
      name = coalesce(${input.name ?? null}, name),
      description = coalesce(${input.description ?? null}, description),
      endpoint = coalesce(${input.endpoint ?? null}, endpoint),
      method = coalesce(${input.method ?? null}, method),
      timeout = coalesce(${input.timeout ?? null}::int, timeout),
      headers = coalesce(${jsonOrNull(input.headers)}::jsonb, headers),
      schema = coalesce(${jsonOrNull(input.schema)}::jsonb, schema),
      updated_at = now()
    WHERE id = ${id} AND user_id = ${userId}
    RETURNING ${toolColumns}`);
}

export async function deleteTool(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  const result = await db.query(sql.unsafe`DELETE FROM tools WHERE id = ${id} AND user_id = ${userId}`);
  return result.rowCount > 0;
}

/** The mid-call tools attached to an assistant. */
export async function listAssistantTools(db: CommonQueryMethods, assistantId: number): Promise<readonly ToolRow[]> {
  return db.any(sql.type(toolRow)`
    SELECT t.id, t.name, t.description, t.endpoint, t.method, t.timeout, t.headers, t.schema, t.created_at, t.updated_at
    FROM tools t JOIN assistant_tools at ON at.tool_id = t.id WHERE at.assistant_id = ${assistantId} ORDER BY t.id`);
}
