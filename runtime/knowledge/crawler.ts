import type { Block } from '../../workers/text.js';
import { OutboundError, type OutboundFetch, type OutboundRequest } from '../net/outbound.js';
import type { WorkerPool } from '../workers.js';

/**
 * Website ingestion. Pages are fetched on the main thread through the outbound guard (10 s and
 * 5 MB per page, at most 5 redirects, only text/html and text/plain) and parsed in the worker
 * pool. `url` crawls breadth-first over same-site links; `links` fetches exactly those pages.
 * robots.txt `Disallow` rules for our agent (or `*`) are honoured.
 */

export const USER_AGENT = 'AssistantPlatformBot/1.0 (+knowledge ingestion)';
const PAGE_TIMEOUT_MS = 10_000;
const PAGE_MAX_BYTES = 5 * 1024 * 1024;
/** Links to these are not pages; they are not followed (nor counted against the link limit). */
const NOT_PAGES = /\.(?:png|jpe?g|gif|webp|svg|ico|bmp|tiff?|pdf|zip|gz|tgz|rar|7z|exe|dmg|msi|mp3|mp4|m4a|wav|ogg|webm|mov|avi|css|js|mjs|json|xml|woff2?|ttf|eot)$/i;

/** New same-site links of one page looked at for following (the limit is at most 50 followed). */
const MAX_EXAMINED_LINKS = 200;
/** The longest the link checks of a page run before letting other work (calls' audio) in. */
const YIELD_AFTER_MS = 4;

/** A failure that no retry will fix (robots, 404, not HTML): the document fails with this message. */
export class CrawlError extends Error {
  override readonly name = 'CrawlError';
}

interface RobotsRules {
  readonly allow: string[];
  readonly disallow: string[];
}

/** Rules of the group for `*` (or our agent's token), per RFC 9309; longest match wins, allow on ties. */
export function parseRobots(text: string, agentToken = 'assistantplatformbot'): RobotsRules {
  const groups: Array<{ agents: string[]; allow: string[]; disallow: string[] }> = [];
  let current: (typeof groups)[number] | undefined;
  let lastWasAgent = false;
  for (const rawLine of text.split(/\r\n|\r|\n/)) {
    const hash = rawLine.indexOf('#');
    const line = (hash === -1 ? rawLine : rawLine.slice(0, hash)).trim();
    const match = /^([A-Za-z-]+)\s*:\s*(.*)$/.exec(line);
    if (!match) continue;
    const field = match[1]!.toLowerCase();
    const value = match[2]!.trim();
    if (field === 'user-agent') {
      if (!current || !lastWasAgent) groups.push((current = { agents: [], allow: [], disallow: [] }));
      current.agents.push(value.toLowerCase());
      lastWasAgent = true;
      continue;
    }
    lastWasAgent = false;
    if (!current) continue;
    // A rule longer than any path checked (MAX_PATH) can match none of them.
    if (!value || value.replaceAll('*', '').length > MAX_PATH + 1) continue;
    if (field === 'allow') current.allow.push(value);
    if (field === 'disallow') current.disallow.push(value);
  }
  const ours = groups.filter((g) => g.agents.some((a) => a !== '*' && agentToken.includes(a)));
  const chosen = ours.length > 0 ? ours : groups.filter((g) => g.agents.includes('*'));
  const rules = (list: string[]) => [...new Set(list)].slice(0, MAX_RULES);
  return { allow: rules(chosen.flatMap((g) => g.allow)), disallow: rules(chosen.flatMap((g) => g.disallow)) };
}

/** Rules kept per list (a robots.txt may have 512 KiB of them; each link is checked against every one). */
const MAX_RULES = 5_000;
/** Links whose path and query are longer are not followed, nor checked. */
const MAX_PATH = 2_048;

/** A robots.txt pattern cut at its stars once, for matching many paths. */
interface CompiledPattern {
  readonly length: number;
  readonly pieces: readonly string[];
  readonly anchored: boolean;
}

function compilePattern(pattern: string): CompiledPattern {
  const anchored = pattern.endsWith('$');
  return { length: pattern.length, pieces: (anchored ? pattern.slice(0, -1) : pattern).split('*'), anchored };
}

/**
 * Whether a compiled pattern (`*` any characters, a final `$` the end of the path) matches the path
 * from its start. Each piece between stars is placed at its first occurrence after the one before,
 * which is where any match can put it, so no backtracking: linear in the path, where a regular
 * expression with several `.*` backtracks polynomially.
 */
function matches({ pieces, anchored }: CompiledPattern, path: string): boolean {
  const first = pieces[0]!;
  if (!path.startsWith(first)) return false;
  if (pieces.length === 1) return !anchored || path.length === first.length;
  let at = first.length;
  const last = pieces.length - 1;
  for (let i = 1; i < last; i++) {
    const found = path.indexOf(pieces[i]!, at);
    if (found === -1) return false;
    at = found + pieces[i]!.length;
  }
  const tail = pieces[last]!;
  if (anchored) return path.length - tail.length >= at && path.endsWith(tail);
  return path.indexOf(tail, at) !== -1;
}

export function patternMatches(pattern: string, path: string): boolean {
  return matches(compilePattern(pattern), path);
}

/** Each rule list compiled once, longest pattern first, so the first match is the one that counts. */
const compiledRules = new WeakMap<RobotsRules, { allow: CompiledPattern[]; disallow: CompiledPattern[] }>();

function compiledOf(rules: RobotsRules): { allow: CompiledPattern[]; disallow: CompiledPattern[] } {
  let compiled = compiledRules.get(rules);
  if (!compiled) {
    const compile = (list: string[]) => list.map(compilePattern).sort((a, b) => b.length - a.length);
    compiled = { allow: compile(rules.allow), disallow: compile(rules.disallow) };
    compiledRules.set(rules, compiled);
  }
  return compiled;
}

/**
 * The length of the longest pattern that matches `path` (-1 for none): the first, as they are
 * sorted longest first. It yields every 64 patterns, so a caller on the event loop can pause there.
 */
function* longestMatch(patterns: readonly CompiledPattern[], path: string): Generator<void, number> {
  for (let i = 0; i < patterns.length; i++) {
    if (i % 64 === 63) yield;
    if (matches(patterns[i]!, path)) return patterns[i]!.length;
  }
  return -1;
}

export function robotsAllows(rules: RobotsRules, path: string): boolean {
  const { allow, disallow } = compiledOf(rules);
  const run = (search: Generator<void, number>) => {
    for (let step = search.next(); ; step = search.next()) if (step.done) return step.value;
  };
  return run(longestMatch(allow, path)) >= run(longestMatch(disallow, path));
}

/** Lets other work (calls' audio) in once the current stretch of checks has run YIELD_AFTER_MS. */
class Slices {
  private started = performance.now();
  async pause(): Promise<void> {
    if (performance.now() - this.started <= YIELD_AFTER_MS) return;
    await new Promise((resolve) => setImmediate(resolve));
    this.started = performance.now();
  }
}

/**
 * `robotsAllows`, pausing between groups of rules: a site's robots.txt may hold thousands of
 * patterns built to be slow (dozens of stars against a long path, some 10 µs each).
 */
async function robotsAllowsSliced(rules: RobotsRules, path: string, slices: Slices): Promise<boolean> {
  const { allow, disallow } = compiledOf(rules);
  const run = async (search: Generator<void, number>) => {
    for (let step = search.next(); ; step = search.next()) {
      if (step.done) return step.value;
      await slices.pause();
    }
  };
  return (await run(longestMatch(allow, path))) >= (await run(longestMatch(disallow, path)));
}

export interface CrawlInput {
  readonly url?: string;
  readonly links?: readonly string[];
  /** Same-site links followed from `url`. */
  readonly relativeLinksLimit?: number;
  /** The owner and the document, named in the log when the guard refuses a page. */
  readonly subject?: OutboundRequest['subject'];
}

export interface CrawlResult {
  readonly blocks: Block[];
  /** Pages whose text was taken. */
  readonly pages: string[];
}

/** robots.txt answers are kept this long, for at most this many sites (the oldest go first). */
const ROBOTS_TTL_MS = 60 * 60_000;
const ROBOTS_CACHE_SIZE = 1_000;

export function createCrawler(deps: { fetch: OutboundFetch; workers: WorkerPool; now?: () => number }) {
  const now = deps.now ?? Date.now;
  const robotsCache = new Map<string, { rules: Promise<RobotsRules>; at: number }>();

  /**
   * The site's robots.txt rules: a missing file (4xx) allows everything and is remembered like a
   * found one; an unreachable site or a server error allows this crawl but is asked again next time.
   */
  function robotsFor(origin: string): Promise<RobotsRules> {
    const cached = robotsCache.get(origin);
    if (cached && now() - cached.at < ROBOTS_TTL_MS) return cached.rules;
    robotsCache.delete(origin);
    const forget = () => {
      if (robotsCache.get(origin)?.rules === rules) robotsCache.delete(origin);
    };
    const rules: Promise<RobotsRules> = deps
      .fetch(`${origin}/robots.txt`, { timeoutMs: 5_000, maxBytes: 512 * 1024, headers: { 'user-agent': USER_AGENT } })
      .then((response) => {
        if (response.status >= 200 && response.status < 300) return parseRobots(response.body.toString('utf8'));
        if (response.status >= 500 || response.status === 429) forget();
        return { allow: [], disallow: [] };
      })
      .catch(() => {
        forget();
        return { allow: [], disallow: [] };
      });
    robotsCache.set(origin, { rules, at: now() });
    if (robotsCache.size > ROBOTS_CACHE_SIZE) robotsCache.delete(robotsCache.keys().next().value!);
    return rules;
  }

  /**
   * One page: its blocks and links, or a CrawlError saying why there are none. Only the page's
   * request names `subject`: robots.txt of the same host, asked first, is refused the same way, and
   * a refused page is one log line, not two.
   */
  async function page(url: string, subject: CrawlInput['subject']): Promise<{ blocks: Block[]; links: string[] }> {
    const target = new URL(url);
    const rules = await robotsFor(target.origin);
    if (!(await robotsAllowsSliced(rules, target.pathname + target.search, new Slices()))) throw new CrawlError(`robots.txt of ${target.host} does not allow ${url}`);
    let response;
    try {
      response = await deps.fetch(url, {
        timeoutMs: PAGE_TIMEOUT_MS,
        maxBytes: PAGE_MAX_BYTES,
        refuseOversize: true,
        headers: { 'user-agent': USER_AGENT, accept: 'text/html,text/plain;q=0.9' },
        subject,
      });
    } catch (error) {
      if (error instanceof OutboundError && !error.retryable) throw new CrawlError(error.message);
      throw error;
    }
    if (response.status < 200 || response.status >= 300) {
      if (response.status >= 500 || response.status === 429) throw new OutboundError(`${url} answered HTTP ${response.status}`, true);
      throw new CrawlError(`${url} answered HTTP ${response.status}`);
    }
    const type = (response.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    const finalUrl = response.url;
    if (type === 'text/plain') {
      const text = response.body.toString('utf8');
      return { blocks: text.split(/\n\s*\n/).filter((p) => p.trim()).map((p) => ({ kind: 'paragraph', text: p, url: finalUrl })), links: [] };
    }
    if (type !== 'text/html' && type !== 'application/xhtml+xml') throw new CrawlError(`${url} is ${type || 'of an unknown type'}, not an HTML or text page`);
    const html = await deps.workers.extractHtml({ html: response.body.toString('utf8'), url: finalUrl });
    return { blocks: html.blocks, links: html.links };
  }

  return {
    /**
     * @throws CrawlError when the start page (or every listed link) cannot be used;
     *   OutboundError (retryable) on network trouble with the start page.
     */
    async crawl(input: CrawlInput): Promise<CrawlResult> {
      const blocks: Block[] = [];
      const pages: string[] = [];
      if (input.links) {
        // A link that fails (for good, or for now) is left out; the document fails only when no
        // link gave a page, and is retried when one of the failures may pass.
        const failures: string[] = [];
        let transient: OutboundError | undefined;
        for (const link of input.links) {
          try {
            const result = await page(link, input.subject);
            blocks.push(...result.blocks);
            pages.push(link);
          } catch (error) {
            if (error instanceof OutboundError && error.retryable) transient ??= error;
            else if (!(error instanceof CrawlError)) throw error;
            failures.push((error as Error).message);
          }
        }
        if (pages.length === 0) throw transient ?? new CrawlError(failures.join('; ') || 'No page could be fetched.');
        return { blocks, pages };
      }

      const start = new URL(input.url!);
      start.hash = '';
      const limit = input.relativeLinksLimit ?? 10;
      const seen = new Set<string>([start.href]);
      const queue: string[] = [start.href];
      let followed = 0;
      while (queue.length > 0) {
        const url = queue.shift()!;
        const isStart = url === start.href;
        let result;
        try {
          result = await page(url, input.subject);
        } catch (error) {
          if (isStart || !(error instanceof CrawlError || error instanceof OutboundError)) throw error;
          continue;
        }
        blocks.push(...result.blocks);
        pages.push(url);
        const rules = await robotsFor(start.origin);
        // New same-site links looked at on this page, followed or not: a page of thousands that robots.txt refuses is not checked whole.
        let examined = 0;
        const slices = new Slices();
        for (const link of result.links) {
          if (followed >= limit || examined >= MAX_EXAMINED_LINKS) break;
          const next = new URL(link);
          if (next.hostname.toLowerCase() !== start.hostname.toLowerCase() || seen.has(next.href)) continue;
          seen.add(next.href);
          examined++;
          await slices.pause();
          const path = next.pathname + next.search;
          if (NOT_PAGES.test(next.pathname) || path.length > MAX_PATH || (next.origin === start.origin && !(await robotsAllowsSliced(rules, path, slices)))) continue;
          queue.push(next.href);
          followed++;
        }
      }
      return { blocks, pages };
    },
  };
}

export type Crawler = ReturnType<typeof createCrawler>;
