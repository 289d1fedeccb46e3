/**
 * Knowledgebases and documents (spec 4.2, section 7 rows, issue shapes):
 * 1. create -> 201 with status empty; 422 without a name; list/get with counts; update; 404 {error}.
 * 2. documents: website by JSON (url or links), files by multipart; 201 processing at once; the
 *    knowledgebase turns processing; the upload is kept in the database (nothing under DATA_DIR)
 *    and a job row enqueued.
 * 3. section 7 rows: file missing, name too long, knowledgebase missing, document missing.
 * 4. a file whose content is not its declared type is 422 on file; over 20 MB is 422.
 * 5. delete document removes the record, job and file's bytes, recomputing status (last one -> empty).
 * 6. delete knowledgebase removes its documents; another user's resources are 404 and never listed.
 */
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';

const api = await startTestPlatform(t);
const alice = await api.user('Alice');
const bob = await api.user('Bob');
const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;

const createKb = async (token = alice.token, name = 'Support') =>
  (await api.request('POST', '/user/knowledgebases', { token, body: { name, description: 'FAQ' } })).body.data.id as number;

const upload = (kbId: number, fields: Record<string, string>, file?: { name: string; bytes: Uint8Array; type?: string }, token = alice.token) => {
  const form = new FormData();
  for (const [key, value] of Object.entries(fields)) form.set(key, value);
  if (file) form.set('file', new Blob([file.bytes], { type: file.type ?? 'application/octet-stream' }), file.name);
  return api.request('POST', `/user/knowledgebases/${kbId}/documents`, { token, raw: form });
};

const minimalPdf = new TextEncoder().encode('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');

t.test('knowledgebase life cycle', async (t) => {
  const created = await api.request('POST', '/user/knowledgebases', { token: alice.token, body: { name: 'Products', description: 'Catalogue' } });
  t.equal(created.status, 201);
  t.match(created.body, { message: String, data: { id: Number, name: 'Products', description: 'Catalogue', status: 'empty', status_label: 'Empty', created_at: iso, updated_at: iso } });

  const missing = await api.request('POST', '/user/knowledgebases', { token: alice.token, body: { description: 'x' } });
  t.equal(missing.status, 422);
  t.same(missing.body, { message: 'The name field is required.', errors: { name: ['The name field is required.'] } });
  const long = await api.request('POST', '/user/knowledgebases', { token: alice.token, body: { name: 'n'.repeat(256), description: 'd'.repeat(256) } });
  t.same(long.body.errors, { name: ['The name may not be greater than 255 characters.'], description: ['The description may not be greater than 255 characters.'] });

  const id = created.body.data.id;
  const got = await api.request('GET', `/user/knowledgebases/${id}`, { token: alice.token });
  t.same(Object.keys(got.body.data).sort(), ['assistants_count', 'created_at', 'description', 'documents_count', 'id', 'name', 'status', 'status_label', 'updated_at']);
  t.match(got.body.data, { documents_count: 0, assistants_count: 0 });

  const updated = await api.request('PUT', `/user/knowledgebases/${id}`, { token: alice.token, body: { name: 'Products 2026', description: null } });
  t.equal(updated.status, 200);
  t.match(updated.body.data, { name: 'Products 2026', description: null });

  const list = await api.request('GET', '/user/knowledgebases', { token: alice.token });
  t.ok(list.body.data.some((k: { id: number }) => k.id === id));

  for (const path of ['/user/knowledgebases/999999', '/user/knowledgebases/abc']) {
    const res = await api.request('GET', path, { token: alice.token });
    t.equal(res.status, 404);
    t.same(res.body, { error: 'Knowledgebase not found.' });
  }
});

t.test('documents: website and files', async (t) => {
  const kb = await createKb();
  const site = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/help' } });
  t.equal(site.status, 201);
  t.same(Object.keys(site.body.data).sort(), ['created_at', 'description', 'id', 'name', 'status', 'status_label', 'type', 'type_label']);
  t.match(site.body.data, { name: 'Site', type: 'website', type_label: 'Website', status: 'processing', status_label: 'Processing', created_at: iso });

  const links = await api.request('POST', `/user/knowledgebases/${kb}/documents`, {
    token: alice.token,
    body: { name: 'Pages', type: 'website', links: [{ link: 'http://127.0.0.1:9/a' }, { link: 'http://127.0.0.1:9/b' }] },
  });
  t.equal(links.status, 201);

  const pdf = await upload(kb, { name: 'Manual', type: 'pdf', description: 'v2' }, { name: 'manual.pdf', bytes: minimalPdf, type: 'application/pdf' });
  t.equal(pdf.status, 201);
  t.match(pdf.body.data, { type: 'pdf', type_label: 'PDF', status: 'processing' });
  const txt = await upload(kb, { name: 'Notes', type: 'txt' }, { name: 'notes.txt', bytes: new TextEncoder().encode('Opening hours: 9 to 5.\nCafé open on Sundays.') });
  t.equal(txt.status, 201);
  t.match(txt.body.data, { type_label: 'TXT' });

  const kbNow = await api.request('GET', `/user/knowledgebases/${kb}`, { token: alice.token });
  t.match(kbNow.body.data, { status: /^(processing|active|failed)$/, documents_count: 4 }, 'recomputed from its documents, which ingestion may already be settling');

  const stored = await withClient(api.databaseUrl, async (db) =>
    (await db.query('SELECT d.id, d.source, j.status FROM documents d JOIN document_jobs j ON j.document_id = d.id WHERE d.knowledgebase_id = $1 ORDER BY d.id', [kb])).rows,
  );
  t.equal(stored.length, 4, 'one job per document');
  t.ok(stored.every((row) => ['pending', 'running', 'done', 'failed'].includes(row.status)));
  t.same(stored[0].source, { url: 'http://127.0.0.1:9/help', relative_links_limit: 10 });
  t.same(stored[1].source, { links: ['http://127.0.0.1:9/a', 'http://127.0.0.1:9/b'] });
  t.same(stored[2].source, { filename: 'manual.pdf', content_type: 'application/pdf', size: minimalPdf.length }, 'named by the file, no path on this machine');
  await t.rejects(access(join(api.config.dataDir, 'uploads')), 'nothing is written under DATA_DIR');

  const doc = await api.request('GET', `/user/knowledgebases/${kb}/documents/${pdf.body.data.id}`, { token: alice.token });
  // Ingestion runs in the background and may already have settled this (invalid) PDF.
  t.match(doc.body.data, { id: pdf.body.data.id, name: 'Manual', description: 'v2', status: /^(processing|failed)$/, created_at: iso, updated_at: iso });
  const all = await api.request('GET', `/user/knowledgebases/${kb}/documents`, { token: alice.token });
  t.equal(all.body.data.length, 4);
});

t.test('section 7 rows and content checks', async (t) => {
  const kb = await createKb();
  const noFile = await upload(kb, { name: 'Manual', type: 'pdf' });
  t.equal(noFile.status, 422);
  t.same(noFile.body.errors, { file: ['A file is required for this document type.'] });
  const jsonNoFile = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Manual', type: 'docx' } });
  t.same(jsonNoFile.body, { message: 'A file is required for this document type.', errors: { file: ['A file is required for this document type.'] } });

  const noSource = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Site', type: 'website' } });
  t.equal(noSource.status, 422);
  t.same(Object.keys(noSource.body.errors).sort(), ['links', 'url']);
  const badLimit = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/', relative_links_limit: 51 } });
  t.same(badLimit.body.errors, { relative_links_limit: ['The relative links limit must be between 1 and 50.'] });
  const emptyLinks = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/', links: [] } });
  t.equal(emptyLinks.status, 201, 'an empty links list beside a url is no list');
  await api.request('DELETE', `/user/knowledgebases/${kb}/documents/${emptyLinks.body.data.id}`, { token: alice.token });
  const onlyEmptyLinks = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Site', type: 'website', links: [] } });
  t.same(onlyEmptyLinks.body.errors, { links: ['The links must have at least 1 items.'] });
  const badType = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'X', type: 'mp3' } });
  t.same(badType.body.errors, { type: ['The selected type is invalid.'] });

  const kbMissing = await api.request('POST', '/user/knowledgebases/999999/documents', { token: alice.token, body: { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/' } });
  t.equal(kbMissing.status, 404);
  t.same(kbMissing.body, { error: 'Knowledgebase not found.' });

  const fakePdf = await upload(kb, { name: 'Fake', type: 'pdf' }, { name: 'fake.pdf', bytes: new TextEncoder().encode('just text') });
  t.equal(fakePdf.status, 422);
  t.same(fakePdf.body.errors, { file: ['The file must be a file of type: pdf.'] });
  const fakeDocx = await upload(kb, { name: 'Fake', type: 'docx' }, { name: 'fake.docx', bytes: minimalPdf });
  t.same(fakeDocx.body.errors, { file: ['The file must be a file of type: docx.'] });
  const binaryTxt = await upload(kb, { name: 'Bin', type: 'txt' }, { name: 'x.txt', bytes: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0x0d, 1, 2, 3]) });
  t.same(binaryTxt.body.errors, { file: ['The file must be a file of type: txt.'] });
  const utf16 = await upload(kb, { name: 'Wide', type: 'txt' }, { name: 'w.txt', bytes: new Uint8Array([0xff, 0xfe, 0x48, 0, 0x69, 0]) });
  t.equal(utf16.status, 201, 'UTF-16 with a BOM is text');
  const huge = await upload(kb, { name: 'Huge', type: 'txt' }, { name: 'huge.txt', bytes: new Uint8Array(20 * 1024 * 1024 + 10).fill(97) });
  t.equal(huge.status, 422);
  t.same(huge.body.errors, { file: ['The file may not be greater than 20480 kilobytes.'] });
  const huger = await upload(kb, { name: 'Huger', type: 'txt' }, { name: 'huger.txt', bytes: new Uint8Array(22 * 1024 * 1024).fill(97) });
  t.same([huger.status, huger.body], [422, { message: 'The file may not be greater than 20480 kilobytes.', errors: { file: ['The file may not be greater than 20480 kilobytes.'] } }], 'also past the body limit, unread');

  const docs = await withClient(api.databaseUrl, async (db) => (await db.query('SELECT count(*)::int AS n FROM documents WHERE knowledgebase_id = $1', [kb])).rows[0].n);
  t.equal(docs, 1, 'refused uploads left no rows');

  const doc = utf16.body.data.id;
  const longName = await api.request('PUT', `/user/knowledgebases/${kb}/documents/${doc}`, { token: alice.token, body: { name: 'n'.repeat(256) } });
  t.equal(longName.status, 422);
  t.same(longName.body.errors, { name: ['The name may not be greater than 255 characters.'] });
  const renamed = await api.request('PUT', `/user/knowledgebases/${kb}/documents/${doc}`, { token: alice.token, body: { name: 'Wide text', type: 'pdf' } });
  t.equal(renamed.status, 200);
  t.same(Object.keys(renamed.body.data).sort(), ['description', 'id', 'name', 'status', 'status_label', 'type', 'type_label', 'updated_at']);
  t.match(renamed.body.data, { name: 'Wide text', type: 'txt' });

  const docMissing = await api.request('PUT', `/user/knowledgebases/${kb}/documents/999999`, { token: alice.token, body: { name: 'x' } });
  t.equal(docMissing.status, 404);
  t.same(docMissing.body, { error: 'Document not found.' });
  const missingAndInvalid = await api.request('PUT', `/user/knowledgebases/${kb}/documents/999999`, { token: alice.token, body: { name: 'n'.repeat(300) } });
  t.equal(missingAndInvalid.status, 404, 'not found comes before validation');
  const kbMissingInvalid = await api.request('POST', '/user/knowledgebases/999999/documents', { token: alice.token, body: { type: 'mp3' } });
  t.equal(kbMissingInvalid.status, 404);
  const kbGone = await api.request('PUT', `/user/knowledgebases/999999/documents/${doc}`, { token: alice.token, body: { name: 'x' } });
  t.same(kbGone.body, { error: 'Knowledgebase not found.' });
  for (const method of ['GET', 'PUT', 'DELETE'] as const) {
    const both = await api.request(method, '/user/knowledgebases/999999/documents/abc', { token: alice.token, body: method === 'PUT' ? { name: 'x' } : undefined });
    t.same([both.status, both.body], [404, { error: 'Knowledgebase not found.' }], `${method}: a missing knowledgebase is named before a malformed document id`);
  }
  const malformed = await api.request('GET', `/user/knowledgebases/${kb}/documents/abc`, { token: alice.token });
  t.same([malformed.status, malformed.body], [404, { error: 'Document not found.' }]);
  const blank = await api.request('PUT', `/user/knowledgebases/${kb}/documents/${doc}`, { token: alice.token, body: { description: '' } });
  t.same([blank.status, blank.body.data?.description], [200, null], 'a blank optional description is no description');
  const blankForm = await upload(kb, { name: 'Blank', type: 'txt', description: '' }, { name: 'blank.txt', bytes: new TextEncoder().encode('hello') });
  t.same([blankForm.status, blankForm.body.data?.description], [201, null], 'an empty form field for the description is accepted');
});

t.test('deleting documents and knowledgebases', async (t) => {
  const kb = await createKb();
  const txt = await upload(kb, { name: 'Only', type: 'txt' }, { name: 'only.txt', bytes: new TextEncoder().encode('hello') });
  const del = await api.request('DELETE', `/user/knowledgebases/${kb}/documents/${txt.body.data.id}`, { token: alice.token });
  t.equal(del.status, 200);
  t.same(del.body, { message: 'Document deleted successfully.' });
  const bytes = await withClient(api.databaseUrl, async (db) => (await db.query('SELECT count(*)::int AS n FROM document_uploads WHERE document_id = $1', [txt.body.data.id])).rows[0].n);
  t.equal(bytes, 0, "the file's bytes are removed");
  const kbNow = await api.request('GET', `/user/knowledgebases/${kb}`, { token: alice.token });
  t.match(kbNow.body.data, { status: 'empty', documents_count: 0 }, 'last document gone -> empty');
  const again = await api.request('DELETE', `/user/knowledgebases/${kb}/documents/${txt.body.data.id}`, { token: alice.token });
  t.same([again.status, again.body], [404, { error: 'Document not found.' }]);
  const noKb = await api.request('DELETE', `/user/knowledgebases/999999/documents/1`, { token: alice.token });
  t.same([noKb.status, noKb.body], [404, { error: 'Knowledgebase not found.' }]);

  const kb2 = await createKb();
  await upload(kb2, { name: 'A', type: 'txt' }, { name: 'a.txt', bytes: new TextEncoder().encode('a') });
  const gone = await api.request('DELETE', `/user/knowledgebases/${kb2}`, { token: alice.token });
  t.equal(gone.status, 200);
  t.equal((await api.request('GET', `/user/knowledgebases/${kb2}`, { token: alice.token })).status, 404);
  const left = await withClient(api.databaseUrl, async (db) => (await db.query('SELECT count(*)::int AS n FROM documents WHERE knowledgebase_id = $1', [kb2])).rows[0].n);
  t.equal(left, 0);
});

t.test('tenant isolation', async (t) => {
  const kb = await createKb(alice.token, 'Private');
  const site = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Site', type: 'website', url: 'http://127.0.0.1:9/' } });
  const doc = site.body.data.id;
  const attempts: Array<[string, string, unknown?]> = [
    ['GET', `/user/knowledgebases/${kb}`],
    ['PUT', `/user/knowledgebases/${kb}`, { name: 'mine' }],
    ['DELETE', `/user/knowledgebases/${kb}`],
    ['GET', `/user/knowledgebases/${kb}/documents`],
    ['POST', `/user/knowledgebases/${kb}/documents`, { name: 'x', type: 'website', url: 'http://127.0.0.1:9/' }],
    ['GET', `/user/knowledgebases/${kb}/documents/${doc}`],
    ['PUT', `/user/knowledgebases/${kb}/documents/${doc}`, { name: 'x' }],
    ['DELETE', `/user/knowledgebases/${kb}/documents/${doc}`],
  ];
  for (const [method, path, body] of attempts) {
    const res = await api.request(method, path, { token: bob.token, body });
    t.equal(res.status, 404, `${method} ${path}`);
    t.same(res.body, { error: 'Knowledgebase not found.' });
  }
  const bobs = await api.request('GET', '/user/knowledgebases', { token: bob.token });
  t.notOk(bobs.body.data.some((k: { id: number }) => k.id === kb));
  t.equal((await api.request('GET', `/user/knowledgebases/${kb}/documents/${doc}`, { token: alice.token })).status, 200, 'still there for its owner');
});
