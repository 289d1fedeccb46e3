/**
 * The chat widget, its look and its conversation, in a real browser (Debian's Chromium through
 * playwright-core):
 * 1. assets: widget.js is JavaScript, an unknown assistant's page and settings are 404, the page
 *    is sent with a nonce Content-Security-Policy; the settings are the assistant's `widget`
 *    default overridden by valid attributes, invalid ones named in `ignored`; the assistant's
 *    `widget` setting refuses a colour that is not #rgb/#rrggbb and an avatar that is not http(s),
 *    and null clears it (the platform's defaults).
 * 2. in Chromium, on a customer page whose script tag (in its <head>) sets title, colour, position
 *    and a greeting teaser: the launcher is in the chosen corner and colour, the teaser shows the
 *    greeting; the panel shows the title, colour and greeting; a message gets the typing
 *    indicator while its reply streams (held after its first word), and the whole reply without it; the close control and
 *    Escape close the panel and give the focus back to the launcher (aria-expanded follows);
 *    a reload shows the panel open with the same conversation and its history, once; the platform
 *    stopped and started again on the same database behind the same address (a proxy): the panel
 *    says it is reconnecting, a message written meanwhile waits, and is sent and answered once the
 *    socket is back.
 * 3. in Chromium, markup in data-title is shown as text (no element made, no script run), and an
 *    invalid colour and a javascript: avatar are ignored; at 375 px the panel fills the screen.
 * Screenshots (open panel, typing indicator, custom colour, mobile width) go to
 * WIDGET_SCREENSHOT_DIR when it is set, otherwise to a temporary directory.
 * When Chromium is not installed the browser part is skipped and says so (.ci/run installs it).
 */
import { existsSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { mkdir, mkdtemp, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { Browser, FrameLocator, Page } from 'playwright-core';
import { startFakeOpenAi } from './fakes/openai.js';
import { startTestPlatform, type TestPlatform } from './helpers/platform.js';
import { startSite } from './helpers/site.js';

// What the functions evaluated in the page read there (the project's types have no DOM).
declare const document: { activeElement: { getAttribute(name: string): string | null; tagName: string } | null };
declare function getComputedStyle(element: unknown): Record<string, string>;

const CHROMIUM = '/usr/bin/chromium';
/** The file's test: a platform started again in a subtest outlives it. */
const root = t;
const fake = await startFakeOpenAi(t);
const llmProviders = { openai: { baseUrl: fake.baseUrl, apiKey: 'k' } };
let api: TestPlatform = await startTestPlatform(t, { llmProviders });
const owner = await api.user();
await api.credit(owner.id, 5);
const shop = await api.assistant(owner.token, {
  name: 'Shop',
  initial_message: 'Hi! Ask me anything about Acme.',
  widget: { title: 'Shop help', color: '#aa0000', avatar_url: 'https://cdn.example/bot.png' },
});
const screenshots = process.env.WIDGET_SCREENSHOT_DIR ?? (await mkdtemp(join(tmpdir(), 'ap-widget-')));
await mkdir(screenshots, { recursive: true });

t.test('assets and settings', async (t) => {
  const script = await fetch(`${api.origin}/widget.js`);
  t.equal(script.status, 200);
  t.match(script.headers.get('content-type'), /javascript/);
  t.match(await script.text(), /data-assistant-id/);
  t.equal((await fetch(`${api.origin}/widget/00000000-0000-4000-8000-000000000000`)).status, 404);
  t.equal((await fetch(`${api.origin}/widget/nope`)).status, 404);
  t.same(await (await fetch(`${api.origin}/widget/nope/settings`)).json(), { status: false, error: 'Assistant not found' });
  const page = await fetch(`${api.origin}/widget/${shop.uuid}?title=%3C/script%3E%3Cscript%3Ealert(1)%3C/script%3E`);
  t.match(page.headers.get('content-type'), /text\/html/);
  t.match(page.headers.get('content-security-policy'), /script-src 'nonce-[^']+'/);
  const html = await page.text();
  t.match(html, shop.uuid);
  t.notMatch(html, /<script>alert/, 'a title cannot close the config element');

  const defaults = (await (await fetch(`${api.origin}/widget/${shop.uuid}/settings`)).json()) as any;
  t.same(defaults, {
    status: true,
    data: { title: 'Shop help', color: '#aa0000', text_color: '#ffffff', avatar_url: 'https://cdn.example/bot.png', position: 'bottom-right', greeting: 'message', greeting_text: 'Hi! Ask me anything about Acme.' },
    ignored: [],
  });
  const query = new URLSearchParams({ title: 'Acme', color: '#FFEB3B', position: 'bottom-left', greeting: 'teaser', avatar: 'javascript:alert(1)', 'text-color': 'red;x:url(y)' });
  const overridden = (await (await fetch(`${api.origin}/widget/${shop.uuid}/settings?${query}`)).json()) as any;
  t.match(overridden.data, { title: 'Acme', color: '#ffeb3b', text_color: '#1d2330', avatar_url: 'https://cdn.example/bot.png', position: 'bottom-left', greeting: 'teaser' }, 'attributes override; dark text on a light colour');
  t.same(overridden.ignored.sort(), ['data-avatar', 'data-text-color']);

  for (const widget of [{ color: 'red' }, { color: '#12345' }, { avatar_url: 'javascript:alert(1)' }, { position: 'top' }, { title: '' }]) {
    const refused = await api.request('PUT', `/user/assistant/${shop.id}`, { token: owner.token, body: { widget } });
    t.equal(refused.status, 422, `widget ${JSON.stringify(widget)} is refused`);
  }
  const shown = await api.request('GET', `/user/assistant/${shop.id}`, { token: owner.token });
  t.same(shown.body.data.widget, { title: 'Shop help', color: '#aa0000', avatar_url: 'https://cdn.example/bot.png' }, 'the stored default is unchanged');
  const other = await api.assistant(owner.token, { name: 'Other', widget: { color: '#123' } });
  t.equal((await api.request('PUT', `/user/assistant/${other.id}`, { token: owner.token, body: { widget: null } })).status, 200);
  const cleared = (await (await fetch(`${api.origin}/widget/${other.uuid}/settings`)).json()) as any;
  t.match(cleared.data, { title: 'Chat with us', color: '#2f5bea', text_color: '#ffffff', avatar_url: null, position: 'bottom-right', greeting: 'message' }, 'null clears the default');
});

const skip = existsSync(CHROMIUM) ? false : `browser test skipped: ${CHROMIUM} is not installed (.ci/run installs Debian's chromium)`;

async function launch(t: Test): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  t.teardown(() => browser.close());
  return browser;
}

async function shot(t: Test, page: Page, name: string): Promise<void> {
  const path = join(screenshots, `widget-${name}.png`);
  await page.screenshot({ path });
  t.ok((await stat(path)).size > 5000, `screenshot ${path}`);
}

/** The element that has the focus in the customer's page (the iframe when the panel has it). */
const focused = (page: Page) => page.evaluate(() => document.activeElement?.getAttribute('data-assistant-widget') ?? document.activeElement?.tagName);

const WAIT = { timeout: 30_000 };

/** A TCP proxy on an ephemeral loopback port to `to(port)`; `to(undefined)` cuts every connection and refuses new ones. */
async function tcpProxy(t: Test, port: number): Promise<{ origin: string; to(port: number | undefined): void }> {
  let target: number | undefined = port;
  const open = new Set<Socket>();
  const server = createServer((client) => {
    if (target === undefined) return void client.destroy();
    const upstream = connect(target, '127.0.0.1');
    const end = () => {
      for (const socket of [client, upstream]) {
        socket.destroy();
        open.delete(socket);
      }
    };
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('error', end).on('close', end);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of open) socket.destroy();
    server.close();
  });
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    to(port) {
      target = port;
      if (port === undefined) for (const socket of open) socket.destroy();
    },
  };
}
const AVATAR = '<svg xmlns="http://www.w3.org/2000/svg" width="80" height="80" viewBox="0 0 80 80"><rect width="80" height="80" fill="#ffd166"/><circle cx="40" cy="32" r="14" fill="#073b4c"/><rect x="18" y="52" width="44" height="22" rx="11" fill="#073b4c"/></svg>';

t.test('a customer page in Chromium', { skip }, async (t) => {
  const browser = await launch(t);
  const site = await startSite(t);
  // The customer's page reaches the platform through a proxy (as behind a load balancer), so the
  // platform can stop and start again on another port at the same address: a port the server
  // closed connections of cannot be bound again for a minute (TIME_WAIT).
  const proxy = await tcpProxy(t, api.platform.port);
  const tag = `<script src="${proxy.origin}/widget.js" data-assistant-id="${shop.uuid}" data-title="Acme support" data-color="#0a7c55" data-position="bottom-left" data-greeting="teaser" data-avatar="${site.origin}/avatar.svg"></script>`;
  site.route('/avatar.svg', { type: 'image/svg+xml', body: AVATAR });
  site.route('/', { body: `<!doctype html><html><head><title>Acme</title>${tag}</head><body style="font-family:sans-serif;margin:40px"><h1>Acme shop</h1><p>Garden tools since 1952.</p></body></html>` });
  const page = await browser.newPage({ viewport: { width: 1000, height: 760 } });
  await page.goto(`${site.origin}/`);

  const launcher = page.locator('[data-assistant-widget="bubble"]');
  await launcher.waitFor(WAIT);
  t.equal(await launcher.evaluate((el) => getComputedStyle(el).backgroundColor), 'rgb(10, 124, 85)', 'the launcher takes data-color');
  t.equal(await launcher.evaluate((el) => getComputedStyle(el).left), '20px', 'bottom-left');
  t.equal(await launcher.getAttribute('aria-expanded'), 'false');
  t.equal(await launcher.getAttribute('aria-label'), 'Open chat: Acme support');
  const teaser = page.locator('[data-assistant-widget="teaser"]');
  await teaser.getByText('Hi! Ask me anything about Acme.').waitFor(WAIT);
  await shot(t, page, 'teaser');

  await launcher.click();
  const chat: FrameLocator = page.frameLocator('[data-assistant-widget="frame"]');
  await chat.locator('.msg.assistant', { hasText: 'Hi! Ask me anything about Acme.' }).waitFor(WAIT);
  await chat.locator('#status.online').waitFor(WAIT);
  t.equal(await teaser.count(), 0, 'the teaser goes when the chat opens');
  t.equal(await launcher.getAttribute('aria-expanded'), 'true');
  t.equal(await chat.locator('h1#title').textContent(), 'Acme support', 'the panel takes data-title');
  t.equal(await chat.locator('header').evaluate((el) => getComputedStyle(el).backgroundColor), 'rgb(10, 124, 85)', 'and data-color');
  t.equal(await chat.locator('#avatar img').getAttribute('src'), `${site.origin}/avatar.svg`, 'and data-avatar');
  const loaded = (img: unknown) => {
    const image = img as { complete: boolean; naturalWidth: number; addEventListener(type: string, listener: () => void): void };
    return new Promise<number>((resolve) => (image.complete ? resolve(image.naturalWidth) : image.addEventListener('load', () => resolve(image.naturalWidth))));
  };
  t.ok((await chat.locator('#avatar img').evaluate(loaded)) > 0, 'the avatar loads');
  t.equal(await chat.locator('#app').getAttribute('role'), 'dialog');
  await chat.locator('#input').waitFor(WAIT);
  await page.waitForFunction(() => document.activeElement?.getAttribute('data-assistant-widget') === 'frame');

  // The typing indicator while the reply streams (held after its first word), gone with the reply.
  let release!: () => void;
  fake.scriptChat({ text: 'We ship worldwide within five days.', heldMidway: new Promise<void>((resolve) => (release = resolve)) });
  await chat.locator('#input').fill('Do you ship abroad?');
  await chat.locator('#send').click();
  await chat.locator('.msg.user:not(.pending)', { hasText: 'Do you ship abroad?' }).waitFor(WAIT);
  await chat.locator('.msg.assistant', { hasText: /^We $/ }).waitFor(WAIT);
  await chat.locator('#typing:not([hidden])').waitFor(WAIT);
  t.equal(await chat.locator('#typing').getAttribute('role'), 'status');
  await shot(t, page, 'typing');
  release();
  await chat.locator('.msg.assistant', { hasText: 'We ship worldwide within five days.' }).waitFor(WAIT);
  await chat.locator('#typing[hidden]').waitFor({ state: 'attached', ...WAIT });
  t.ok(await chat.locator('#typing').isHidden(), 'the indicator goes with the reply');
  await shot(t, page, 'open-custom-colour');

  // Close control, then Escape: both give the focus back to the launcher.
  await chat.locator('#close').click();
  await page.locator('[data-assistant-widget="frame"]').waitFor({ state: 'hidden', ...WAIT });
  t.equal(await launcher.getAttribute('aria-expanded'), 'false');
  await page.waitForFunction(() => document.activeElement?.getAttribute('data-assistant-widget') === 'bubble');
  t.equal(await focused(page), 'bubble', 'the close control gives the focus to the launcher');
  await page.keyboard.press('Enter');
  await page.locator('[data-assistant-widget="frame"]').waitFor({ state: 'visible', ...WAIT });
  await page.waitForFunction(() => document.activeElement?.getAttribute('data-assistant-widget') === 'frame');
  await chat.locator('#input').press('Escape');
  await page.locator('[data-assistant-widget="frame"]').waitFor({ state: 'hidden', ...WAIT });
  await page.waitForFunction(() => document.activeElement?.getAttribute('data-assistant-widget') === 'bubble');
  t.pass('Escape closes the panel and the launcher has the focus');
  await launcher.click();

  // A reload: the same conversation, its history shown once.
  await page.reload();
  await chat.locator('.msg.assistant', { hasText: 'We ship worldwide within five days.' }).waitFor(WAIT);
  await chat.locator('#status.online').waitFor(WAIT);
  t.equal(await chat.locator('.msg').count(), 3, 'greeting, question and answer, once each');
  t.equal(await chat.locator('.msg.user').textContent(), 'Do you ship abroad?');
  const listed = await api.request('GET', '/user/conversations?type=widget', { token: owner.token });
  t.equal(listed.body.total, 1, 'no second conversation was started');

  // The platform stops and starts again on the same database, behind the same address.
  proxy.to(undefined);
  await api.platform.close({ graceMs: 0, hurry: Promise.resolve() });
  await chat.locator('#status:not(.online)', { hasText: 'Reconnecting' }).waitFor(WAIT);
  await chat.locator('#input').fill('Are you open on Sunday?');
  await chat.locator('#input').press('Enter');
  await chat.locator('.msg.user.pending', { hasText: 'Are you open on Sunday?' }).waitFor(WAIT);
  fake.scriptChat({ text: 'Yes, from ten to four.' });
  api = await startTestPlatform(root, { llmProviders, databaseUrl: api.databaseUrl });
  proxy.to(api.platform.port);
  await chat.locator('.msg.assistant', { hasText: 'Yes, from ten to four.' }).waitFor(WAIT);
  await chat.locator('#status.online').waitFor(WAIT);
  t.equal(await chat.locator('.msg.user.pending, .msg.user.failed').count(), 0, 'the waiting message was sent');
  const history = await api.request('GET', `/conversations/${listed.body.data[0].id}`);
  t.same(history.body.history.map((m: { content: string }) => m.content), ['Hi! Ask me anything about Acme.', 'Do you ship abroad?', 'We ship worldwide within five days.', 'Are you open on Sunday?', 'Yes, from ten to four.']);
});

t.test('untrusted attributes and a phone screen', { skip }, async (t) => {
  const browser = await launch(t);
  const site = await startSite(t);
  const plain = await api.assistant(owner.token, { name: 'Plain', initial_message: 'Hello! How can I help?' });
  const title = '<img src=x onerror="window.parent.pwned=1;window.pwned=1">';
  const tag = `<script src="${api.origin}/widget.js" data-assistant-id="${plain.uuid}" data-title='${title}' data-color="red;background:url(https://evil.example/x)" data-avatar="javascript:alert(1)"></script>`;
  site.route('/', { body: `<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"><title>Acme</title></head><body><h1>Acme shop</h1>${tag}</body></html>` });
  const page = await browser.newPage({ viewport: { width: 375, height: 667 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
  const warnings: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'warning') warnings.push(message.text());
  });
  await page.goto(`${site.origin}/`);
  const launcher = page.locator('[data-assistant-widget="bubble"]');
  await launcher.waitFor(WAIT);
  t.equal(await launcher.evaluate((el) => getComputedStyle(el).backgroundColor), 'rgb(47, 91, 234)', 'an invalid colour leaves the default');
  await launcher.click();
  const chat = page.frameLocator('[data-assistant-widget="frame"]');
  await chat.locator('.msg.assistant', { hasText: 'Hello! How can I help?' }).waitFor(WAIT);
  t.equal(await chat.locator('h1#title').textContent(), title, 'the markup is shown as text');
  t.equal(await chat.locator('h1#title img').count(), 0, 'no element was made of it');
  t.equal(await chat.locator('#avatar img').count(), 0, 'a javascript: avatar is not used');
  t.equal(await chat.locator('#avatar').textContent(), '<', 'the title initial stands in');
  t.notOk(await page.evaluate(() => (globalThis as { pwned?: number }).pwned), 'no script ran');
  t.ok(warnings.some((text) => /ignored invalid attributes: .*data-color.*data-avatar|data-avatar.*data-color/.test(text)), 'the console names the ignored attributes');
  const box = await page.locator('[data-assistant-widget="frame"]').boundingBox();
  t.same(box && [box.x, box.y, box.width, box.height], [0, 0, 375, 667], 'the panel fills a phone screen');
  t.ok(await launcher.isHidden(), 'the launcher steps aside; the close control is in the panel');
  await chat.locator('#status.online').waitFor(WAIT);
  await shot(t, page, 'mobile');
  await chat.locator('#close').click();
  await launcher.waitFor({ state: 'visible', ...WAIT });
});
