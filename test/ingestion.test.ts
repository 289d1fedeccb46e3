/**
 * Knowledge ingestion end to end, over HTTP against a real server and a local website:
 * 1. TXT (UTF-16), multi-page PDF and DOCX (headings, table) reach `active` and their text is searchable,
 *    with the page or URL as the source; the knowledgebase turns active.
 * 2. A corrupt PDF, an encrypted PDF, an image-only (textless) PDF and a zip bomb disguised as DOCX reach
 *    `failed` with a clear error, and the server keeps serving.
 * 3. Crawling: same-site links breadth-first up to relative_links_limit, robots.txt honoured, other
 *    sites and non-HTML skipped; `links` fetches exactly those pages; a redirect loop and a 404 start
 *    page fail the document.
 * 4. Retrieval returns the passage that answers a question; deleting a document removes its passages.
 * 5. The search operation validates its input and is private to the owner.
 * 6. Documents created together are processed at most INGESTION_CONCURRENCY at a time.
 * The worker's poll runs on a manual clock: a job starts when its document is created, and the
 * tests read a document once the worker is idle.
 */
import t from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { makeDocx, makeLyingZipBomb, makeZipBomb } from './fixtures/docx.js';
import { makePdf } from './fixtures/pdf.js';
import { withClient } from './helpers/database.js';
import { startTestPlatform } from './helpers/platform.js';
import { html, startSite } from './helpers/site.js';

const clock = new ManualClock();
const api = await startTestPlatform(t, { outboundAllowPrivate: true }, { clock });
const site = await startSite(t);
const alice = await api.user('Alice');
const bob = await api.user('Bob');

const newKb = async (name = 'Help') => (await api.request('POST', '/user/knowledgebases', { token: alice.token, body: { name } })).body.data.id as number;

function upload(kb: number, type: string, name: string, bytes: Uint8Array) {
  const form = new FormData();
  form.set('name', name);
  form.set('type', type);
  form.set('file', new Blob([bytes]), `${name}.${type}`);
  return api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, raw: form });
}

/** The document as a client reads it, once every job due has run. */
async function settled(kb: number, id: number): Promise<{ status: string; error: string | null }> {
  await api.platform.runtime.settled();
  return (await api.request('GET', `/user/knowledgebases/${kb}/documents/${id}`, { token: alice.token })).body.data;
}

const search = (kb: number, query: string, token = alice.token, limit?: number) =>
  api.request('POST', `/user/knowledgebases/${kb}/search`, { token, body: { query, ...(limit ? { limit } : {}) } });

t.test('files become searchable', async (t) => {
  const kb = await newKb();
  const txt = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('# Opening hours\nWe are open from 9 am to 5 pm on weekdays.\n\nParking is free behind the building.', 'utf16le')]);
  const pages = [
    ['Welcome to the Acme manual.', 'This page is about installation.'],
    ['Refund policy', 'Refunds are issued within 14 days of purchase to the original card.'],
    ['Warranty', 'The warranty covers two years of normal use.'],
  ];
  const docx = await makeDocx([
    { heading: 'Pricing plans' },
    { paragraph: 'Our plans are billed monthly.' },
    { table: [['Plan', 'Monthly price'], ['Starter', '9 dollars'], ['Business', '49 dollars']] },
  ]);
  const created = await Promise.all([upload(kb, 'txt', 'Hours', txt), upload(kb, 'pdf', 'Manual', makePdf(pages)), upload(kb, 'docx', 'Pricing', docx)]);
  for (const res of created) t.equal(res.status, 201);
  for (const res of created) t.match(await settled(kb, res.body.data.id), { status: 'active', error: null }, res.body.data.name);
  t.match((await api.request('GET', `/user/knowledgebases/${kb}`, { token: alice.token })).body.data, { status: 'active', status_label: 'Active' });

  const hours = await search(kb, 'When are you open on weekdays?');
  t.equal(hours.status, 200);
  t.match(hours.body.data[0], { document_name: 'Hours', content: /9 am to 5 pm/, source: null, score: Number });
  t.match(hours.body.data[0].content, /^Opening hours\n/, 'the heading is carried into the passage');

  const refund = await search(kb, 'how long do refunds take');
  t.match(refund.body.data[0], { document_id: created[1]!.body.data.id, document_name: 'Manual', content: /14 days/, source: 'page 2' });

  const price = await search(kb, 'business plan price', alice.token, 1);
  t.equal(price.body.data.length, 1);
  t.match(price.body.data[0], { document_name: 'Pricing', content: /Business \| 49 dollars/ });
  t.match(price.body.data[0].content, /^Pricing plans/);

  const deleted = await api.request('DELETE', `/user/knowledgebases/${kb}/documents/${created[1]!.body.data.id}`, { token: alice.token });
  t.equal(deleted.status, 200);
  const after = await search(kb, 'how long do refunds take');
  t.notOk(after.body.data.some((p: { document_name: string }) => p.document_name === 'Manual'), 'deleted document no longer found');
});

t.test('bad files fail with a clear error and the server keeps serving', async (t) => {
  const kb = await newKb('Broken');
  const corrupt = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(2048, 0x42)]);
  const cases: Array<[string, string, Uint8Array, RegExp]> = [
    ['pdf', 'Corrupt', corrupt, /corrupt or unreadable/],
    ['pdf', 'Locked', makePdf([['secret']], { encrypt: true }), /password-protected/],
    ['pdf', 'Scan', makePdf([[], []]), /no extractable text/],
    ['docx', 'Bomb', await makeZipBomb(120), /unreasonable size/],
    ['docx', 'Lying bomb', await makeLyingZipBomb(200, 400), /unreasonable size/],
  ];
  const ids: number[] = [];
  for (const [type, name, bytes] of cases) {
    const res = await upload(kb, type, name, bytes);
    t.equal(res.status, 201, `${name} accepted for processing`);
    ids.push(res.body.data.id);
  }
  for (const [i, [, name, , error]] of cases.entries()) {
    const doc = await settled(kb, ids[i]!);
    t.equal(doc.status, 'failed', name);
    t.match(doc.error, error, name);
  }
  t.match((await api.request('GET', `/user/knowledgebases/${kb}`, { token: alice.token })).body.data, { status: 'failed', status_label: 'Failed' });
  t.equal((await api.request('GET', '//health')).status, 200, 'still serving');
});

t.test('crawling a site', async (t) => {
  site.route('/robots.txt', { type: 'text/plain', body: 'User-agent: *\nDisallow: /private\n' });
  site.route('/', { body: html('Home', '<nav><a href="/nav-only">menu</a></nav><h1>Acme</h1><p>Welcome home.</p><a href="/a">A</a> <a href="/private/secret">secret</a> <a href="/b#top">B</a> <a href="https://elsewhere.invalid/x">out</a> <a href="/logo.png">logo</a> <a href="/c">C</a>') });
  site.route('/a', { body: html('A', '<h2>Shipping</h2><p>We ship to 40 countries within three days.</p>') });
  site.route('/b', { body: html('B', '<p>Returns are accepted for thirty days.</p><a href="/d">D</a>') });
  site.route('/c', { body: html('C', '<p>Careers: we are hiring plumbers.</p>') });
  site.route('/d', { body: html('D', '<p>Deep page about gift cards.</p>') });
  site.route('/private/secret', { body: html('S', '<p>Confidential launch codes.</p>') });
  site.route('/logo.png', { type: 'image/png', body: Buffer.from([0x89, 0x50]) });
  site.route('/notes.txt', { type: 'text/plain; charset=utf-8', body: 'Plain notes about warehouse opening times.' });
  site.route('/loop', { status: 302, headers: { location: '/loop2' } });
  site.route('/loop2', { status: 302, headers: { location: '/loop' } });

  const kb = await newKb('Site');
  const crawl = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Site', type: 'website', url: `${site.origin}/`, relative_links_limit: 3 } });
  t.equal(crawl.status, 201);
  t.match(await settled(kb, crawl.body.data.id), { status: 'active' });
  t.notOk(site.requests.includes('/private/secret'), 'robots.txt honoured');
  t.notOk(site.requests.includes('/c'), 'nothing past the link limit');
  t.notOk(site.requests.includes('/d'), 'breadth-first: no deeper page beyond the limit');
  t.ok(site.requests.includes('/a') && site.requests.includes('/b'));
  t.match((await search(kb, 'which countries do you ship to')).body.data[0], { content: /40 countries/, source: `${site.origin}/a` });
  t.notOk(JSON.stringify((await search(kb, 'launch codes confidential')).body.data).includes('Confidential'));
  t.notOk(JSON.stringify((await search(kb, 'menu')).body.data).includes('menu'), 'navigation dropped');

  const links = await api.request('POST', `/user/knowledgebases/${kb}/documents`, {
    token: alice.token,
    body: { name: 'Listed', type: 'website', links: [{ link: `${site.origin}/d` }, { link: `${site.origin}/notes.txt` }] },
  });
  t.match(await settled(kb, links.body.data.id), { status: 'active' });
  t.match((await search(kb, 'gift cards')).body.data[0], { content: /gift cards/ });
  t.match((await search(kb, 'warehouse opening times')).body.data[0], { content: /warehouse/, source: `${site.origin}/notes.txt` });

  const loop = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Loop', type: 'website', url: `${site.origin}/loop` } });
  t.match(await settled(kb, loop.body.data.id), { status: 'failed', error: /Too many redirects/ });
  const missing = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Gone', type: 'website', url: `${site.origin}/nowhere` } });
  t.match(await settled(kb, missing.body.data.id), { status: 'failed', error: /HTTP 404/ });
  const image = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Logo', type: 'website', url: `${site.origin}/logo.png` } });
  t.match(await settled(kb, image.body.data.id), { status: 'failed', error: /not an HTML or text page/ });
  const blocked = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Secret', type: 'website', url: `${site.origin}/private/secret` } });
  t.match(await settled(kb, blocked.body.data.id), { status: 'failed', error: /robots\.txt/ });
  t.match((await api.request('GET', `/user/knowledgebases/${kb}`, { token: alice.token })).body.data, { status: 'active' }, 'active documents keep the knowledgebase active');

  site.route('/flaky', { status: 503, type: 'text/plain', body: 'down' });
  const partly = await api.request('POST', `/user/knowledgebases/${kb}/documents`, {
    token: alice.token,
    body: { name: 'Partly', type: 'website', links: [{ link: `${site.origin}/flaky` }, { link: `${site.origin}/c` }] },
  });
  t.match(await settled(kb, partly.body.data.id), { status: 'active' }, 'a link that is down is left out, the others are kept');
  t.match((await search(kb, 'hiring plumbers')).body.data[0], { content: /plumbers/, source: `${site.origin}/c` });

  const other = await startSite(t);
  let robotsDown = true;
  other.route('/robots.txt', () => (robotsDown ? { status: 503, type: 'text/plain', body: 'busy' } : { type: 'text/plain', body: 'User-agent: *\nDisallow: /\n' }));
  other.route('/', { body: html('Other', '<p>Another site about bicycles.</p>') });
  const first = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Other', type: 'website', url: `${other.origin}/` } });
  t.match(await settled(kb, first.body.data.id), { status: 'active' }, 'robots.txt unavailable: this crawl goes ahead');
  robotsDown = false;
  const second = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Other again', type: 'website', url: `${other.origin}/` } });
  t.match(await settled(kb, second.body.data.id), { status: 'failed', error: /robots\.txt/ }, 'and is asked again next time');

  site.route('/nul.txt', { type: 'text/plain', body: 'Binary\u0000ish notes\u0007 about the loading dock.' });
  const nul = await api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: 'Nul', type: 'website', url: `${site.origin}/nul.txt` } });
  t.match(await settled(kb, nul.body.data.id), { status: 'active', error: null }, 'control characters are dropped, not fatal');
  t.match((await search(kb, 'loading dock')).body.data[0], { content: 'Binaryish notes about the loading dock.' });
});

t.test('documents created together are processed at most INGESTION_CONCURRENCY (2) at a time', async (t) => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let open = 0;
  let most = 0;
  let twoOpen!: () => void;
  const fetchingTwo = new Promise<void>((resolve) => (twoOpen = resolve));
  for (let i = 0; i < 6; i++) {
    site.route(`/held/${i}`, () => {
      most = Math.max(most, ++open);
      if (open === 2) twoOpen();
      void held.then(() => open--);
      return { body: html(`Held ${i}`, `<p>Held page number ${i} about pallets.</p>`), heldUntil: held };
    });
  }
  const kb = await newKb('Held');
  const created = await Promise.all(
    Array.from({ length: 6 }, (_, i) => api.request('POST', `/user/knowledgebases/${kb}/documents`, { token: alice.token, body: { name: `Held ${i}`, type: 'website', url: `${site.origin}/held/${i}` } })),
  );
  const running = async () => withClient(api.databaseUrl, async (db) => (await db.query(`SELECT count(*)::int AS n FROM document_jobs WHERE status = 'running'`)).rows[0].n as number);
  await fetchingTwo;
  // Polls come and go while both slots are taken: none claims a third job.
  for (let i = 0; i < 5; i++) {
    clock.advance(1_000);
    await clock.settled();
  }
  t.equal(open, 2, 'two pages fetched at once');
  t.equal(await running(), 2, 'two jobs running, the others waiting');
  release();
  for (const res of created) t.match(await settled(kb, res.body.data.id), { status: 'active' });
  t.equal(most, 2, 'never more than two at any time');
});

t.test('search operation', async (t) => {
  const kb = await newKb('Empty');
  const none = await search(kb, 'anything');
  t.same([none.status, none.body], [200, { data: [] }]);
  const invalid = await api.request('POST', `/user/knowledgebases/${kb}/search`, { token: alice.token, body: { limit: 50 } });
  t.same(invalid.body.errors, { query: ['The query field is required.'], limit: ['The limit must be between 1 and 20.'] });
  const foreign = await search(kb, 'anything', bob.token);
  t.same([foreign.status, foreign.body], [404, { error: 'Knowledgebase not found.' }]);
});
