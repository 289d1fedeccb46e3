/**
 * The crawler's robots.txt memory: an answer is kept for an hour (then asked again), for at most
 * 1,000 sites (the oldest forgotten first). The crawler runs over a scripted fetch of plain-text
 * pages on a scripted clock.
 */
import t from 'tap';
import { createCrawler } from '../runtime/knowledge/crawler.js';
import type { OutboundFetch } from '../runtime/net/outbound.js';
import type { WorkerPool } from '../runtime/workers.js';
import { htmlBlocks } from '../workers/extract.js';

t.test('robots.txt answers expire after an hour, and only 1,000 sites are remembered', async (t) => {
  const asked: string[] = [];
  const fetch: OutboundFetch = async (url) => {
    if (url.endsWith('/robots.txt')) asked.push(new URL(url).host);
    return { status: 200, headers: { 'content-type': 'text/plain' }, body: Buffer.from(url.endsWith('/robots.txt') ? '' : 'Some text.'), truncated: false, url };
  };
  let time = 0;
  const crawler = createCrawler({ fetch, workers: {} as WorkerPool, now: () => time });
  const crawl = (host: string) => crawler.crawl({ links: [`http://${host}/page`] });

  await crawl('a.example');
  await crawl('a.example');
  t.same(asked, ['a.example'], 'asked once within the hour');
  time += 60 * 60_000;
  await crawl('a.example');
  t.same(asked, ['a.example', 'a.example'], 'asked again after it');

  for (let i = 0; i < 1_000; i++) await crawl(`site${i}.example`);
  asked.length = 0;
  await crawl('site999.example');
  t.same(asked, [], 'a recent site is still known');
  await crawl('a.example');
  t.same(asked, ['a.example'], 'the oldest was forgotten to keep 1,000');
});

t.test('a page of links robots.txt refuses: only the first 200 new ones are looked at; a page hands back at most 1,000 links', async (t) => {
  const fetched: string[] = [];
  const anchors = (paths: string[]) => `<html><body><p>Start page.</p>${paths.map((p) => `<a href="${p}">${p}</a>`).join('')}</body></html>`;
  const pages: Record<string, string> = {
    '/refused-first': anchors([...Array.from({ length: 250 }, (_, i) => `/private/${i}`), '/open/1', '/open/2']),
    '/refused-fewer': anchors([...Array.from({ length: 150 }, (_, i) => `/private/${i}`), '/open/1', '/open/2']),
  };
  const fetch: OutboundFetch = async (url) => {
    const { pathname } = new URL(url);
    fetched.push(pathname);
    if (pathname === '/robots.txt') return { status: 200, headers: { 'content-type': 'text/plain' }, body: Buffer.from('User-agent: *\nDisallow: /private\n'), truncated: false, url };
    const html = pages[pathname];
    return html
      ? { status: 200, headers: { 'content-type': 'text/html' }, body: Buffer.from(html), truncated: false, url }
      : { status: 200, headers: { 'content-type': 'text/plain' }, body: Buffer.from(`Page ${pathname}.`), truncated: false, url };
  };
  const workers = { extractHtml: async (input: { html: string; url: string }) => htmlBlocks(input.html, input.url) } as unknown as WorkerPool;
  const crawler = createCrawler({ fetch, workers });

  const beyond = await crawler.crawl({ url: 'http://site.example/refused-first' });
  t.same(beyond.pages, ['http://site.example/refused-first'], 'the open links come after 250 refused ones: not reached');
  const within = await crawler.crawl({ url: 'http://site.example/refused-fewer' });
  t.same(within.pages, ['http://site.example/refused-fewer', 'http://site.example/open/1', 'http://site.example/open/2'], 'after 150 refused ones they are');
  t.notOk(fetched.some((path) => path.startsWith('/private')), 'nothing robots.txt refuses was fetched');

  const crowded = htmlBlocks(anchors(Array.from({ length: 1_500 }, (_, i) => `/p${i}`)), 'http://site.example/');
  t.equal(crowded.links.length, 1_000);
  t.equal(crowded.links.at(-1), 'http://site.example/p999', 'the first 1,000, in document order');
});

t.test('a robots.txt of thousands of slow patterns is checked in short stretches: other work keeps running', async (t) => {
  // 5,000 patterns of 44 stars, each some 10 µs against a 2,000-character path, none matching.
  const robots = `User-agent: *\n${Array.from({ length: 5_000 }, (_, i) => `Disallow: /${'*a'.repeat(44)}z${i}`).join('\n')}\n`;
  const links = Array.from({ length: 12 }, (_, i) => `/${'a'.repeat(2_000)}${i}`);
  const fetch: OutboundFetch = async (url) => {
    const { pathname } = new URL(url);
    if (pathname === '/robots.txt') return { status: 200, headers: { 'content-type': 'text/plain' }, body: Buffer.from(robots), truncated: false, url };
    if (pathname === '/') return { status: 200, headers: { 'content-type': 'text/html' }, body: Buffer.from(links.map((l) => `<a href="${l}">x</a>`).join('')), truncated: false, url };
    return { status: 200, headers: { 'content-type': 'text/plain' }, body: Buffer.from('A page.'), truncated: false, url };
  };
  const workers = { extractHtml: async (input: { html: string; url: string }) => htmlBlocks(input.html, input.url) } as unknown as WorkerPool;
  let done = false;
  let longest = 0;
  let last = performance.now();
  const beat = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    if (!done) setImmediate(beat);
  };
  setImmediate(beat);
  const started = performance.now();
  const result = await createCrawler({ fetch, workers }).crawl({ url: 'http://site.example/', relativeLinksLimit: 20 });
  done = true;
  longest = Math.max(longest, performance.now() - last);
  t.equal(result.pages.length, 13, 'every link allowed and followed');
  const total = performance.now() - started;
  // Checked in one go, each link's 5,000 patterns held the loop some 50 ms, and 16 links at a time most of a second.
  t.ok(longest < Math.max(100, total / 5), `the longest stretch without a turn for other work: ${longest.toFixed(0)} ms of ${total.toFixed(0)} ms`);
});
