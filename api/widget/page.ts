import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { WidgetLook } from './settings.js';

/**
 * The embeddable chat widget: the loader a customer puts on their site (`client/loader.js`, served
 * as /widget.js) and the chat panel it opens in an iframe (`client/panel.js` and `panel.css` in the
 * page below). Plain browser JavaScript, no framework and no CDN, read once at start-up.
 */
const read = (name: string) => readFileSync(new URL(`./client/${name}`, import.meta.url), 'utf8');
export const LOADER_SCRIPT = read('loader.js');
const PANEL_SCRIPT = read('panel.js');
const PANEL_STYLE = read('panel.css');

/** JSON that is safe inside a <script> element: nothing in it can close the element or break the line. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

/**
 * The chat page of an assistant with its look decided, and the Content-Security-Policy it is sent
 * with: only its own script and style run (by nonce), it fetches only from its own origin, and images
 * (the avatar) come only over http(s). Colours are the only settings written into CSS, and only as
 * validated `#rgb`/`#rrggbb`; the title and the avatar reach the page as JSON data, set as text and
 * as an image's `src`.
 */
export function widgetPage(assistantUuid: string, look: WidgetLook): { html: string; csp: string } {
  const nonce = randomBytes(16).toString('base64');
  const config = scriptJson({ assistantId: assistantUuid, ...look });
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Chat</title>
<style nonce="${nonce}">:root{--primary:${look.color};--on-primary:${look.text_color}}
${PANEL_STYLE}</style></head>
<body><div id="app" role="dialog" aria-labelledby="title" aria-describedby="status">
<header><span id="avatar" aria-hidden="true"></span><div class="who"><h1 id="title"></h1><p id="status"><span class="dot"></span><span id="status-text">Connecting…</span></p></div>
<button id="close" type="button" aria-label="Close chat"><svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true"><path d="M6 6l12 12M18 6L6 18" stroke="currentColor" stroke-width="2" stroke-linecap="round"/></svg></button></header>
<div id="log" role="log" aria-live="polite" aria-label="Messages"><div id="typing" class="typing" role="status" hidden><span class="sr-only">The assistant is typing</span><i></i><i></i><i></i></div></div>
<form id="form" autocomplete="off"><input id="input" maxlength="2000" placeholder="Write a message…" aria-label="Message" enterkeyhint="send">
<button id="send" type="submit" aria-label="Send message" disabled><svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true"><path d="M3.4 20.4 21 12 3.4 3.6 3.4 10.2 15 12 3.4 13.8z" fill="currentColor"/></svg></button></form>
</div>
<script id="widget-config" type="application/json">${config}</script>
<script nonce="${nonce}">${PANEL_SCRIPT}</script></body></html>`;
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    'img-src http: https: data:',
    // 'self' covers the page's own ws(s) origin in CSP 3; older WebKit needs the schemes named.
    "connect-src 'self' ws: wss:",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
  return { html, csp };
}
