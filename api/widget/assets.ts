/**
 * The embeddable chat widget: a self-contained chat page (no framework, no CDN) and the loader
 * script a customer puts on their site:
 *
 *   <script src="https://PLATFORM/widget.js" data-assistant-id="ASSISTANT_UUID" async></script>
 *
 * The script adds a chat bubble; clicking it opens the page in an iframe. The page starts a widget
 * conversation over REST and talks over the conversation socket, showing replies as they stream.
 */

export function widgetPage(assistantUuid: string): string {
  const id = JSON.stringify(assistantUuid);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Chat</title>
<style>
*{box-sizing:border-box}html,body{margin:0;height:100%;font:15px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;color:#1d2330;background:#fff}
#app{display:flex;flex-direction:column;height:100%}
header{padding:12px 16px;background:#2f5bea;color:#fff;font-weight:600}
#log{flex:1;overflow-y:auto;padding:12px 14px;display:flex;flex-direction:column;gap:8px;background:#f6f7fb}
.msg{max-width:82%;padding:8px 12px;border-radius:14px;white-space:pre-wrap;word-wrap:break-word}
.assistant{align-self:flex-start;background:#fff;border:1px solid #e3e6ef}
.user{align-self:flex-end;background:#2f5bea;color:#fff}
.error{align-self:center;color:#b42318;font-size:13px}
form{display:flex;gap:8px;padding:10px;border-top:1px solid #e3e6ef}
input{flex:1;padding:10px 12px;border:1px solid #cfd4e2;border-radius:20px;font:inherit}
button{padding:0 16px;border:0;border-radius:20px;background:#2f5bea;color:#fff;font:inherit;cursor:pointer}
button:disabled{opacity:.5}
</style></head>
<body><div id="app"><header>Chat with us</header><div id="log" role="log" aria-live="polite"></div>
<form id="form"><input id="input" autocomplete="off" maxlength="2000" placeholder="Type a message…" aria-label="Message"><button id="send" disabled>Send</button></form></div>
<script>
(function () {
  var assistantId = ${id};
  var log = document.getElementById('log'), form = document.getElementById('form'), input = document.getElementById('input'), send = document.getElementById('send');
  var socket, streaming = null;
  function add(role, text) { var el = document.createElement('div'); el.className = 'msg ' + role; el.textContent = text; log.appendChild(el); log.scrollTop = log.scrollHeight; return el; }
  function fail(text) { var el = document.createElement('div'); el.className = 'error'; el.textContent = text; log.appendChild(el); }
  fetch('/api/conversations', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ assistant_id: assistantId, type: 'widget' }) })
    .then(function (r) { return r.json(); })
    .then(function (body) {
      if (!body.status) { fail(body.error || 'The chat is unavailable.'); return; }
      (body.history || []).forEach(function (m) { add(m.role, m.content); });
      var scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
      socket = new WebSocket(scheme + location.host + '/ws/conversations/' + body.conversation_id);
      socket.onopen = function () { send.disabled = false; input.focus(); };
      socket.onmessage = function (e) {
        var f = JSON.parse(e.data);
        if (f.type === 'delta') { if (!streaming) streaming = add('assistant', ''); streaming.textContent += f.text; log.scrollTop = log.scrollHeight; }
        else if (f.type === 'message' && f.role === 'assistant') { if (streaming) { streaming.textContent = f.content; streaming = null; } else add('assistant', f.content); }
        else if (f.type === 'error') { streaming = null; fail(f.error); }
      };
      socket.onclose = function () { send.disabled = true; };
    })
    .catch(function () { fail('The chat is unavailable.'); });
  form.addEventListener('submit', function (e) {
    e.preventDefault();
    var text = input.value.trim();
    if (!text || !socket || socket.readyState !== 1) return;
    add('user', text);
    socket.send(JSON.stringify({ type: 'message', text: text }));
    input.value = '';
  });
})();
</script></body></html>`;
}

export const WIDGET_SCRIPT = `(function () {
  var script = document.currentScript;
  if (!script) return;
  var assistantId = script.getAttribute('data-assistant-id');
  if (!assistantId) { console.error('Assistant widget: add data-assistant-id to the script tag.'); return; }
  var origin = new URL(script.src).origin;
  var bubble = document.createElement('button');
  bubble.type = 'button';
  bubble.setAttribute('aria-label', 'Open chat');
  bubble.setAttribute('data-assistant-widget', 'bubble');
  bubble.innerHTML = '<svg width="26" height="26" viewBox="0 0 24 24" aria-hidden="true"><path fill="#fff" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4H4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z"/></svg>';
  bubble.style.cssText = 'position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;background:#2f5bea;color:#fff;font-size:24px;box-shadow:0 6px 20px rgba(0,0,0,.25);cursor:pointer;z-index:2147483646';
  var frame = null;
  bubble.addEventListener('click', function () {
    if (!frame) {
      frame = document.createElement('iframe');
      frame.src = origin + '/widget/' + encodeURIComponent(assistantId);
      frame.title = 'Chat';
      frame.setAttribute('data-assistant-widget', 'frame');
      frame.style.cssText = 'position:fixed;right:20px;bottom:90px;width:360px;height:520px;max-width:calc(100vw - 40px);max-height:calc(100vh - 110px);border:0;border-radius:14px;box-shadow:0 10px 30px rgba(0,0,0,.25);background:#fff;z-index:2147483647';
      document.body.appendChild(frame);
    } else {
      frame.style.display = frame.style.display === 'none' ? 'block' : 'none';
    }
  });
  // A script in <head> (async or not) can run before <body> exists.
  if (document.body) document.body.appendChild(bubble);
  else document.addEventListener('DOMContentLoaded', function () { document.body.appendChild(bubble); });
})();
`;
