/**
 * The crawler's robots.txt memory: an answer is kept for an hour (then asked again), for at most
 * 1,000 sites (the oldest forgotten first). The crawler runs over a scripted fetch of plain-text
 * pages on a scripted clock.
 */
import t from 'tap';
import { createCrawler } from '../runtime/knowledge/crawler.js';
import type { OutboundFetch } from '../runtime/net/outbound.js';
import type { WorkerPool } from '../runtime/workers.js';

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
