import { ValidationError, type FieldErrors } from '../../runtime/errors.js';
import type { KnowledgeService, NewDocument } from '../../runtime/knowledge/service.js';
import {
  FILE_TOO_LARGE,
  MAX_UPLOAD_BYTES,
  createDocumentSchema,
  createKnowledgebaseSchema,
  searchSchema,
  updateDocumentSchema,
  updateKnowledgebaseSchema,
} from '../../schemas/knowledge.js';
import { childIdParam, idParam, userId } from '../http/params.js';
import { json, type ApiRequest, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { array, dataOf, message, messageWith, without } from '../../schemas/shapes.js';
import { document, knowledgebase, passage } from '../../schemas/responses.js';

const tag = 'Knowledgebases';

/** Validates a create-document request: JSON for websites, multipart for files (spec 2.3a). */
function newDocument(req: ApiRequest): NewDocument {
  const errors: FieldErrors = {};
  let input: ReturnType<typeof createDocumentSchema> | undefined;
  // `links` only counts when `url` is absent (spec 2.3a): an empty list beside a url is none.
  const body = req.body as Record<string, unknown> | null;
  const given = body !== null && typeof body === 'object' && Array.isArray(body.links) && body.links.length === 0 && body.url !== undefined ? { ...body, links: undefined } : body;
  try {
    input = createDocumentSchema(given);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    Object.assign(errors, error.errors);
  }
  const type = input?.type ?? (req.body as { type?: unknown } | undefined)?.type;
  const file = req.files.file;
  if (type === 'website' && input && input.url === undefined && input.links === undefined) {
    errors.url = ['The url field is required when links is not present.'];
    errors.links = ['The links field is required when url is not present.'];
  }
  if ((type === 'pdf' || type === 'txt' || type === 'docx') && !errors.file) {
    if (!file) errors.file = ['A file is required for this document type.'];
    else if (file.data.length > MAX_UPLOAD_BYTES) errors.file = [FILE_TOO_LARGE];
  }
  if (Object.keys(errors).length > 0 || !input) throw new ValidationError(errors);
  const base = { name: input.name, description: input.description ?? null };
  if (input.type === 'website') {
    return { ...base, type: 'website', url: input.url, links: input.links, relativeLinksLimit: input.relative_links_limit ?? 10 };
  }
  return { ...base, type: input.type, file: { filename: file!.filename, contentType: file!.contentType, data: file!.data } };
}

export function knowledgeRoutes(knowledge: KnowledgeService): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/knowledgebases',
      auth: 'user',
      family: 'error',
      failureMessage: 'Failed to create knowledgebase. Please try again.',
      tag,
      summary: 'Create a knowledgebase',
      requestSchema: createKnowledgebaseSchema.schema,
      responses: { 201: body(messageWith(without(knowledgebase, ['documents_count', 'assistants_count']), 'The new knowledgebase')) },
      async handler(req) {
        const data = await knowledge.createKnowledgebase(userId(req), createKnowledgebaseSchema(req.body));
        const { documents_count: _d, assistants_count: _a, ...created } = data;
        return json(201, { message: 'Knowledgebase created successfully.', data: created });
      },
    },
    {
      method: 'GET',
      path: '/api/user/knowledgebases',
      auth: 'user',
      family: 'error',
      tag,
      summary: 'List knowledgebases',
      responses: { 200: body(dataOf(array(knowledgebase, 'Your knowledgebases'), 'Your knowledgebases')) },
      async handler(req) {
        return json(200, { data: await knowledge.listKnowledgebases(userId(req)) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/knowledgebases/:id',
      auth: 'user',
      family: 'error',
      tag,
      summary: 'Get a knowledgebase',
      responses: { 200: body(dataOf(knowledgebase, 'The knowledgebase')) },
      async handler(req) {
        return json(200, { data: await knowledge.getKnowledgebase(userId(req), idParam(req, 'id', 'knowledgebase_not_found')) });
      },
    },
    {
      method: 'PUT',
      path: '/api/user/knowledgebases/:id',
      auth: 'user',
      family: 'error',
      tag,
      summary: 'Rename or describe a knowledgebase',
      requestSchema: updateKnowledgebaseSchema.schema,
      responses: { 200: body(messageWith(knowledgebase, 'The updated knowledgebase')) },
      async handler(req) {
        const id = idParam(req, 'id', 'knowledgebase_not_found');
        const data = await knowledge.updateKnowledgebase(userId(req), id, () => updateKnowledgebaseSchema(req.body));
        return json(200, { message: 'Knowledgebase updated successfully.', data });
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/knowledgebases/:id',
      auth: 'user',
      family: 'error',
      failureMessage: 'Failed to delete knowledgebase. Please try again.',
      tag,
      summary: 'Delete a knowledgebase with its documents; assistants using it lose it',
      responses: { 200: body(message('Deleted')) },
      async handler(req) {
        await knowledge.deleteKnowledgebase(userId(req), idParam(req, 'id', 'knowledgebase_not_found'));
        return json(200, { message: 'Knowledgebase deleted successfully.' });
      },
    },
    {
      method: 'POST',
      path: '/api/user/knowledgebases/:id/documents',
      auth: 'user',
      family: 'error',
      multipart: true,
      // The body limit is the file's, with a little room for the other fields: over it, the file is.
      tooLarge: { status: 422, body: { message: FILE_TOO_LARGE, errors: { file: [FILE_TOO_LARGE] } } },
      failureMessage: 'Failed to create document. Please try again.',
      tag,
      summary: 'Add a document (JSON for website, multipart/form-data for pdf, txt, docx); processing continues in the background',
      requestSchema: createDocumentSchema.schema,
      responses: { 201: body(messageWith(without(document, ['updated_at', 'error']), 'The new document (processing)')) },
      async handler(req) {
        const knowledgebaseId = idParam(req, 'id', 'knowledgebase_not_found');
        const doc = await knowledge.createDocument(userId(req), knowledgebaseId, () => newDocument(req));
        const { updated_at: _u, error: _e, ...data } = doc;
        return json(201, { message: 'Document created successfully. Processing has started.', data });
      },
    },
    {
      method: 'GET',
      path: '/api/user/knowledgebases/:id/documents',
      auth: 'user',
      family: 'error',
      tag,
      summary: 'List the documents of a knowledgebase',
      responses: { 200: body(dataOf(array(document, 'Its documents'), 'The documents')) },
      async handler(req) {
        const knowledgebaseId = idParam(req, 'id', 'knowledgebase_not_found');
        return json(200, { data: await knowledge.listDocuments(userId(req), knowledgebaseId) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/knowledgebases/:id/documents/:documentId',
      auth: 'user',
      family: 'error',
      tag,
      summary: 'Get a document (poll this until processing ends)',
      responses: { 200: body(dataOf(document, 'The document')) },
      async handler(req) {
        const knowledgebaseId = idParam(req, 'id', 'knowledgebase_not_found');
        const id = childIdParam(req, 'documentId');
        return json(200, { data: await knowledge.getDocument(userId(req), knowledgebaseId, id) });
      },
    },
    {
      method: 'PUT',
      path: '/api/user/knowledgebases/:id/documents/:documentId',
      auth: 'user',
      family: 'error',
      tag,
      summary: 'Rename or describe a document (type and content cannot change)',
      requestSchema: updateDocumentSchema.schema,
      responses: { 200: body(messageWith(without(document, ['created_at', 'error']), 'The updated document')) },
      async handler(req) {
        const knowledgebaseId = idParam(req, 'id', 'knowledgebase_not_found');
        const id = childIdParam(req, 'documentId');
        const doc = await knowledge.updateDocument(userId(req), knowledgebaseId, id, () => updateDocumentSchema(req.body));
        const { created_at: _c, error: _e, ...data } = doc;
        return json(200, { message: 'Document updated successfully.', data });
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/knowledgebases/:id/documents/:documentId',
      auth: 'user',
      family: 'error',
      failureMessage: 'Failed to delete document. Please try again.',
      tag,
      summary: 'Delete a document, its processed content and embeddings',
      responses: { 200: body(message('Deleted')) },
      async handler(req) {
        const knowledgebaseId = idParam(req, 'id', 'knowledgebase_not_found');
        const id = childIdParam(req, 'documentId');
        await knowledge.deleteDocument(userId(req), knowledgebaseId, id);
        return json(200, { message: 'Document deleted successfully.' });
      },
    },
    {
      method: 'POST',
      path: '/api/user/knowledgebases/:id/search',
      auth: 'user',
      family: 'error',
      tag,
      summary: 'The passages that best answer a query (full-text and vector rankings fused)',
      requestSchema: searchSchema.schema,
      responses: { 200: body(dataOf(array(passage, 'Best first'), 'The passages')) },
      async handler(req) {
        const id = idParam(req, 'id', 'knowledgebase_not_found');
        const owner = userId(req);
        await knowledge.getKnowledgebase(owner, id);
        const { query, limit } = searchSchema(req.body);
        return json(200, { data: await knowledge.search(owner, id, query, limit ?? 5) });
      },
    },
  ];
}
