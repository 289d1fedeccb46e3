/**
 * The chat widget in a real browser (Debian's Chromium through playwright-core):
 * 1. a customer page with one <script src=".../widget.js" data-assistant-id="..."> (in its <head>) shows a chat bubble;
 * 2. clicking it opens the chat, which shows the greeting, sends a message over the socket and shows
 *    the streamed reply; a screenshot is taken of it;
 * 3. /widget/<unknown> is 404 and widget.js is served as JavaScript.
 * When Chromium is not installed the browser part is skipped and says so (.ci/run installs it).
 */
import { existsSync } from 'node:fs';
import { mkdtemp, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startFakeOpenAi } from './fakes/openai.js';
import { startTestPlatform } from './helpers/platform.js';
import { startSite } from './helpers/site.js';

const CHROMIUM = '/usr/bin/chromium';
const fake = await startFakeOpenAi(t);
const api = await startTestPlatform(t, { llmProviders: { openai: { baseUrl: fake.baseUrl, apiKey: 'k' } } });
const owner = await api.user();
await api.credit(owner.id, 5);
const { uuid } = await api.assistant(owner.token, { name: 'Shop', initial_message: 'Hi! Ask me anything about Acme.' });

t.test('assets', async (t) => {
  const script = await fetch(`${api.origin}/widget.js`);
  t.equal(script.status, 200);
  t.match(script.headers.get('content-type'), /javascript/);
  t.match(await script.text(), /data-assistant-id/);
  t.equal((await fetch(`${api.origin}/widget/00000000-0000-4000-8000-000000000000`)).status, 404);
  t.equal((await fetch(`${api.origin}/widget/nope`)).status, 404);
  const page = await fetch(`${api.origin}/widget/${uuid}`);
  t.match(page.headers.get('content-type'), /text\/html/);
  t.match(await page.text(), uuid);
});

t.test('chatting in Chromium', { skip: existsSync(CHROMIUM) ? false : `browser test skipped: ${CHROMIUM} is not installed (.ci/run installs Debian's chromium)` }, async (t) => {
  const { chromium } = await import('playwright-core');
  const site = await startSite(t);
  // In <head>, where the script runs before <body> exists.
  site.route('/', { body: `<!doctype html><html><head><title>Acme</title><script src="${api.origin}/widget.js" data-assistant-id="${uuid}"></script></head><body><h1>Acme shop</h1></body></html>` });
  const profile = await mkdtemp(join(tmpdir(), 'ap-chromium-'));
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  t.teardown(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 900, height: 700 } });
  await page.goto(`${site.origin}/`);
  const bubble = page.locator('[data-assistant-widget="bubble"]');
  await bubble.waitFor({ timeout: 30_000 });
  await bubble.click();
  const chat = page.frameLocator('[data-assistant-widget="frame"]');
  await chat.locator('.msg.assistant', { hasText: 'Hi! Ask me anything about Acme.' }).waitFor({ timeout: 30_000 });
  fake.scriptChat({ text: 'We ship worldwide within five days.' });
  await chat.locator('#send:not([disabled])').waitFor({ timeout: 30_000 });
  await chat.locator('#input').fill('Do you ship abroad?');
  await chat.locator('#send').click();
  await chat.locator('.msg.user', { hasText: 'Do you ship abroad?' }).waitFor();
  await chat.locator('.msg.assistant', { hasText: 'We ship worldwide within five days.' }).waitFor({ timeout: 30_000 });
  const screenshot = join(profile, 'widget.png');
  await page.screenshot({ path: screenshot });
  t.ok((await stat(screenshot)).size > 5000, `screenshot written to ${screenshot}`);
  const history = (await api.request('GET', `/user/conversations?type=widget`, { token: owner.token })).body;
  t.equal(history.total, 1, 'a widget conversation was created');
  t.match(history.data[0], { message_count: 3, total_cost: 0.01 });
});
