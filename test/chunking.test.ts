/**
 * Chunking and robots.txt (pure parts of ingestion):
 * 1. chunks are about 800 characters with about 15% overlap and never cut a word.
 * 2. the heading in force starts every chunk; a new heading, PDF page or web page starts a new chunk.
 * 3. robots.txt groups, longest-match precedence, wildcards and `$`; hostile files parse and match
 *    in linear time.
 */
import t from 'tap';
import { parseRobots, patternMatches, robotsAllows } from '../runtime/knowledge/crawler.js';
import { chunkBlocks } from '../workers/text.js';

const words = (n: number, prefix = 'word') => Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(' ');

t.test('sizes, overlap and word boundaries', async (t) => {
  const text = words(400);
  const chunks = chunkBlocks([{ kind: 'paragraph', text }]);
  t.ok(chunks.length >= 4);
  const vocabulary = new Set(text.split(' '));
  for (const chunk of chunks) {
    t.ok(chunk.content.length <= 800, `length ${chunk.content.length}`);
    t.ok(chunk.content.split(/\s+/).every((word) => vocabulary.has(word)), 'only whole words');
  }
  for (let i = 1; i < chunks.length; i++) {
    const previous = chunks[i - 1]!.content;
    const firstWord = chunks[i]!.content.split(' ')[0]!;
    const overlap = previous.slice(previous.lastIndexOf(firstWord));
    t.ok(overlap.length >= 60 && overlap.length <= 140, `overlap ${overlap.length} characters`);
  }
  t.same(chunks.map((c) => c.source), chunks.map(() => null));
});

t.test('no word is lost or glued to the next where a chunk ends on a space', async (t) => {
  for (const [count, prefix] of [[2_000, 'body'], [1_500, 'w'], [3_000, 'longerword']] as const) {
    const text = words(count, prefix);
    const vocabulary = new Set(text.split(' '));
    const chunks = chunkBlocks([{ kind: 'paragraph', text }]);
    const seen = chunks.flatMap((chunk) => chunk.content.split(/\s+/));
    t.same(seen.filter((word) => !vocabulary.has(word)), [], `${prefix}: only whole words`);
    t.equal(new Set(seen).size, vocabulary.size, `${prefix}: every word is in a chunk`);
  }
});

t.test('headings, pages and pages of a site', async (t) => {
  const chunks = chunkBlocks([
    { kind: 'heading', text: 'Returns', page: 1 },
    { kind: 'paragraph', text: words(150, 'ret'), page: 1 },
    { kind: 'paragraph', text: 'Second page text.', page: 2 },
    { kind: 'heading', text: 'Shipping', page: 2 },
    { kind: 'paragraph', text: 'Ships in three days.', page: 2 },
  ]);
  t.ok(chunks.every((c, i) => (i < chunks.length - 1 ? c.content.startsWith('Returns\n') : c.content.startsWith('Shipping\n'))));
  t.same(chunks.map((c) => c.source), ['page 1', 'page 1', 'page 2', 'page 2']);
  t.equal(chunks[2]!.content, 'Returns\nSecond page text.', 'the heading carries across a page break');
  t.equal(chunks[3]!.content, 'Shipping\nShips in three days.');

  const site = chunkBlocks([
    { kind: 'heading', text: 'A', url: 'https://x/a' },
    { kind: 'paragraph', text: 'alpha', url: 'https://x/a' },
    { kind: 'paragraph', text: 'beta', url: 'https://x/b' },
  ]);
  t.same(site, [{ content: 'A\nalpha', source: 'https://x/a' }, { content: 'beta', source: 'https://x/b' }], 'headings do not leak into the next page');
  t.same(chunkBlocks([{ kind: 'paragraph', text: '   ' }]), []);
});

t.test('robots.txt', async (t) => {
  const rules = parseRobots(['User-agent: Googlebot', 'Disallow: /', '', 'User-agent: *', 'Disallow: /private', 'Allow: /private/public', 'Disallow: /*.pdf$', 'Disallow: /tmp*'].join('\n'));
  t.ok(robotsAllows(rules, '/'));
  t.notOk(robotsAllows(rules, '/private/x'));
  t.ok(robotsAllows(rules, '/private/public/page'), 'longest match wins');
  t.notOk(robotsAllows(rules, '/files/a.pdf'));
  t.ok(robotsAllows(rules, '/files/a.pdf?x=1'), '$ anchors the end');
  t.notOk(robotsAllows(rules, '/tmpfiles'));
  const ours = parseRobots('User-agent: *\nAllow: /\n\nUser-agent: AssistantPlatformBot\nDisallow: /\n');
  t.notOk(robotsAllows(ours, '/anything'), 'a group naming us wins over *');
  t.ok(robotsAllows(parseRobots(''), '/x'));
});

t.test('robots.txt patterns match as the regular expressions they stand for, without backtracking', async (t) => {
  const reference = (pattern: string, path: string) => {
    const anchored = pattern.endsWith('$');
    const body = (anchored ? pattern.slice(0, -1) : pattern).split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*');
    return new RegExp(`^${body}${anchored ? '$' : ''}`).test(path);
  };
  // A small alphabet makes overlaps and repeats common: the cases greedy matching could get wrong.
  let seed = 7;
  const random = (n: number) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31), seed % n);
  const pick = (alphabet: string, length: number) => Array.from({ length }, () => alphabet[random(alphabet.length)]).join('');
  let disagreements = 0;
  for (let i = 0; i < 5_000; i++) {
    const pattern = `/${pick('ab*', random(7))}${random(3) === 0 ? '$' : ''}`;
    const path = `/${pick('ab', random(9))}`;
    if (patternMatches(pattern, path) !== reference(pattern, path)) disagreements++;
  }
  t.equal(disagreements, 0, '5,000 random patterns and paths');

  // As a regular expression, eight stars against 2,000 characters would not finish.
  const rules = parseRobots(`User-agent: *\nDisallow: /${'*a'.repeat(8)}*b\nDisallow: /${'*a'.repeat(8)}$\n`);
  t.ok(robotsAllows(rules, `/${'a'.repeat(2_000)}b`) === false && robotsAllows(rules, `/${'a'.repeat(2_000)}c`), 'decided at once');

  // Comments end at the line's end, and a lone CR ends a line (RFC 9309); 200,000 '#' are one cheap comment.
  const commented = parseRobots(`User-agent: *\r${'#'.repeat(200_000)}\rDisallow: /private # not /public\r`);
  t.same(commented, { allow: [], disallow: ['/private'] });
  const many = parseRobots(`User-agent: *\n${Array.from({ length: 6_000 }, (_, i) => `Disallow: /p${i % 5_500}`).join('\n')}\nDisallow: /${'x'.repeat(3_000)}\n`);
  t.equal(many.disallow.length, 5_000, 'repeats merged, at most 5,000 rules kept; one longer than any path checked is dropped');
});

t.test('a heading of a paragraph\'s length heads its chunks with its first words only, and none of it is lost', async (t) => {
  const long = words(3_000, 'title');
  const body = words(2_000, 'body');
  const chunks = chunkBlocks([{ kind: 'heading', text: long }, { kind: 'paragraph', text: body }]);
  const head = long.slice(0, long.lastIndexOf(' ', 200));
  t.ok(chunks[0]!.content.startsWith(long.slice(0, 700)), 'the first chunk is the start of the long heading, as text');
  t.ok(chunks.slice(1).every((chunk) => chunk.content.split('\n')[0] === head), 'the others are headed by its first 200 characters, cut at a word');
  t.ok(chunks.every((chunk) => chunk.content.length <= 800 + 201), 'every chunk stays chunk-sized');
  const seen = new Set(chunks.flatMap((chunk) => chunk.content.split(/\s+/)));
  t.ok([...long.split(' '), ...body.split(' ')].every((word) => seen.has(word)), 'every word of the heading and the text is in a chunk');

  const lines = chunkBlocks([{ kind: 'heading', text: long.replaceAll(' title1', '\ntitle1') }, { kind: 'paragraph', text: body }]);
  t.notOk(lines[0]!.content.includes('\n'), 'a long heading over several lines: its first chunk does not start with its first words twice');
  const emoji = chunkBlocks([{ kind: 'heading', text: `a${'😀'.repeat(150)}` }, { kind: 'paragraph', text: body }]);
  t.ok(emoji.every((chunk) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(chunk.content)), 'a heading without spaces is never cut inside a character');
});
