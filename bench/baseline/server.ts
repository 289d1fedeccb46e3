import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { findLiveToken } from '../../runtime/auth/repository.js';
import { sameDigest, tokenDigest } from '../../runtime/auth/secrets.js';
import { PlatformError, ValidationError } from '../../runtime/errors.js';
import type { Runtime } from '../../runtime/platform.js';
import { createToolSchema } from '../../schemas/tools.js';

/**
 * The REST benchmark's baseline: the same three operations as the platform, written the
 * conventional way with Fastify over the same database pool, SQL and validation schemas (the
 * platform's repositories, services and catalog cache). Like most servers it authenticates every
 * request with the token query; the platform answers most of those from its token cache instead.
 * Not part of the product.
 */

async function principal(runtime: Runtime, request: FastifyRequest): Promise<number> {
  const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
  const digest = match && match[1]!.length <= 200 ? tokenDigest(match[1]!) : undefined;
  const row = digest ? await findLiveToken(runtime.pool, digest) : null;
  if (!row || !sameDigest(row.token_digest, digest!)) throw new PlatformError('unauthenticated');
  return row.user_id;
}

function fail(reply: FastifyReply, error: unknown): FastifyReply {
  if (error instanceof ValidationError) return reply.code(422).send({ message: error.message, errors: error.errors });
  if (error instanceof PlatformError) return reply.code(error.statusCode).send({ message: error.message });
  return reply.code(500).send({ message: 'Server error.' });
}

export async function startBaseline(runtime: Runtime): Promise<{ origin: string; app: FastifyInstance }> {
  const app = Fastify({ logger: false });
  const { catalog, assistants, tools } = runtime.services;
  app.get('/api/user/assistants/languages', async (request, reply) => {
    try {
      await principal(runtime, request);
      const { rows } = await catalog.get();
      return rows.languages.map(({ id, name, iso_2 }) => ({ id, name, iso_2 }));
    } catch (error) {
      return fail(reply, error);
    }
  });
  app.get<{ Params: { id: string } }>('/api/user/assistant/:id', async (request, reply) => {
    try {
      const userId = await principal(runtime, request);
      const id = Number(request.params.id);
      if (!Number.isSafeInteger(id) || id < 1) throw new PlatformError('assistant_not_found');
      return { data: await assistants.get(userId, id) };
    } catch (error) {
      return fail(reply, error);
    }
  });
  app.post('/api/user/tools', async (request, reply) => {
    try {
      const userId = await principal(runtime, request);
      const data = await tools.create(userId, createToolSchema(request.body ?? {}));
      return reply.code(201).send({ message: 'Tool created successfully.', data });
    } catch (error) {
      return fail(reply, error);
    }
  });
  app.delete<{ Params: { id: string } }>('/api/user/tools/:id', async (request, reply) => {
    try {
      const userId = await principal(runtime, request);
      const id = Number(request.params.id);
      if (!Number.isSafeInteger(id) || id < 1) throw new PlatformError('tool_not_found');
      await tools.remove(userId, id);
      return { message: 'Tool deleted successfully.' };
    } catch (error) {
      return fail(reply, error);
    }
  });
  const origin = await app.listen({ port: 0, host: '127.0.0.1' });
  return { origin, app };
}
