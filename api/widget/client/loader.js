/*
 * widget.js: the chat launcher a customer puts on their site.
 *
 *   <script src="https://PLATFORM/widget.js" data-assistant-id="ASSISTANT_UUID"
 *     data-title="Acme support" data-color="#0a7c55" data-text-color="#ffffff"
 *     data-avatar="https://acme.example/bot.png" data-position="bottom-left" data-greeting="teaser" async></script>
 *
 * Every data-* attribute but the id is optional and overrides the assistant's default look; the
 * platform validates them (GET /widget/<id>/settings) and the console names those it ignored. The
 * launcher opens the chat panel (/widget/<id>) in an iframe; the panel's close control and Escape
 * close it and give the focus back to the launcher. Whether the panel is open is kept for the tab
 * (sessionStorage), so a reload or the next page of the site shows it as it was.
 */
(function () {
  var script = document.currentScript;
  if (!script) return;
  var assistantId = script.getAttribute('data-assistant-id');
  if (!assistantId) { console.error('Assistant widget: add data-assistant-id to the script tag.'); return; }
  var origin = new URL(script.src).origin;
  var query = new URLSearchParams();
  ['title', 'color', 'text-color', 'avatar', 'position', 'greeting'].forEach(function (name) {
    var value = script.getAttribute('data-' + name);
    if (value !== null) query.set(name, value);
  });
  var base = origin + '/widget/' + encodeURIComponent(assistantId);
  var openKey = 'assistant-widget-open:' + assistantId, teaserKey = 'assistant-widget-teaser:' + assistantId;
  var session = {
    get: function (key) { try { return sessionStorage.getItem(key); } catch (e) { return null; } },
    set: function (key, value) { try { if (value) sessionStorage.setItem(key, value); else sessionStorage.removeItem(key); } catch (e) { /* blocked */ } },
  };
  var CHAT_ICON = '<svg width="26" height="26" viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H9l-5 4v-4H4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z"/></svg>';
  var CLOSE_ICON = '<svg width="24" height="24" viewBox="0 0 24 24" aria-hidden="true"><path d="M6 9l6 6 6-6" fill="none" stroke="currentColor" stroke-width="2.4" stroke-linecap="round" stroke-linejoin="round"/></svg>';

  function settings(attempt) {
    fetch(base + '/settings?' + query.toString())
      .then(function (r) {
        if (r.status === 404) throw new Error('gone');
        if (!r.ok) throw new Error('retry');
        return r.json();
      })
      .then(function (body) {
        if (body.ignored && body.ignored.length) console.warn('Assistant widget: ignored invalid attributes: ' + body.ignored.join(', '));
        whenBody(function () { mount(body.data); });
      })
      .catch(function (error) {
        if (error && error.message === 'gone') return console.error('Assistant widget: no assistant has the id ' + assistantId + '.');
        // The platform is restarting or unreachable: try again, less and less often.
        var ceiling = Math.min(30000, 1000 * Math.pow(2, attempt));
        setTimeout(function () { settings(attempt + 1); }, ceiling / 2 + Math.random() * (ceiling / 2));
      });
  }

  function whenBody(fn) {
    // A script in <head> (async or not) can run before <body> exists.
    if (document.body) fn();
    else document.addEventListener('DOMContentLoaded', fn);
  }

  function mount(look) {
    var side = look.position === 'bottom-left' ? 'left' : 'right';
    var narrow = window.matchMedia('(max-width: 480px)');
    var frame = null, isOpen = false;

    var launcher = document.createElement('button');
    launcher.type = 'button';
    launcher.setAttribute('data-assistant-widget', 'bubble');
    launcher.setAttribute('aria-haspopup', 'dialog');
    launcher.setAttribute('aria-expanded', 'false');
    launcher.setAttribute('aria-controls', 'assistant-widget-frame');
    launcher.style.cssText = 'position:fixed;bottom:20px;' + side + ':20px;width:60px;height:60px;border-radius:50%;border:0;padding:0;display:flex;align-items:center;justify-content:center;box-shadow:0 6px 24px rgba(0,0,0,.22);cursor:pointer;z-index:2147483646;transition:transform .15s ease';
    launcher.style.background = look.color;
    launcher.style.color = look.text_color;

    var teaser = null;
    if (look.greeting === 'teaser' && look.greeting_text && !session.get(teaserKey) && !session.get(openKey)) {
      teaser = document.createElement('div');
      teaser.setAttribute('data-assistant-widget', 'teaser');
      teaser.setAttribute('role', 'status');
      teaser.style.cssText = 'position:fixed;bottom:92px;' + side + ':20px;max-width:min(300px,calc(100vw - 40px));box-sizing:border-box;padding:12px 36px 12px 14px;background:#fff;color:#1d2330;border-radius:14px;box-shadow:0 8px 28px rgba(0,0,0,.18);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;cursor:pointer;z-index:2147483646';
      var words = document.createElement('span');
      words.textContent = look.greeting_text;
      var dismiss = document.createElement('button');
      dismiss.type = 'button';
      dismiss.setAttribute('aria-label', 'Dismiss');
      dismiss.textContent = '\u00d7';
      dismiss.style.cssText = 'position:absolute;top:4px;right:4px;width:28px;height:28px;border:0;border-radius:50%;background:transparent;color:#5b6275;font-size:20px;line-height:1;cursor:pointer';
      dismiss.addEventListener('click', function (e) { e.stopPropagation(); hideTeaser(); launcher.focus(); });
      teaser.addEventListener('click', function () { open(true); });
      teaser.appendChild(words);
      teaser.appendChild(dismiss);
    }

    function hideTeaser() {
      if (!teaser) return;
      teaser.remove();
      teaser = null;
      session.set(teaserKey, '1');
    }

    function place() {
      if (!frame) return;
      var full = narrow.matches;
      frame.style.cssText = full
        ? 'position:fixed;inset:0;width:100%;height:100%;border:0;border-radius:0;background:#fff;z-index:2147483647'
        : 'position:fixed;bottom:92px;' + side + ':20px;width:380px;height:600px;max-width:calc(100vw - 40px);max-height:calc(100vh - 112px);border:0;border-radius:16px;box-shadow:0 12px 40px rgba(0,0,0,.22);background:#fff;z-index:2147483647';
      frame.style.display = isOpen ? 'block' : 'none';
      // Full screen, the panel's own close control closes it.
      launcher.style.display = isOpen && full ? 'none' : 'flex';
    }

    function render() {
      launcher.setAttribute('aria-expanded', String(isOpen));
      launcher.setAttribute('aria-label', (isOpen ? 'Close chat: ' : 'Open chat: ') + look.title);
      launcher.innerHTML = isOpen ? CLOSE_ICON : CHAT_ICON;
      place();
    }

    function open(focus) {
      hideTeaser();
      if (!frame) {
        frame = document.createElement('iframe');
        frame.id = 'assistant-widget-frame';
        frame.src = base + '?' + query.toString();
        frame.setAttribute('data-assistant-widget', 'frame');
        frame.setAttribute('allow', 'clipboard-write');
        frame.title = look.title;
        frame.addEventListener('load', function () { if (isOpen && focus) tellFocus(); });
        document.body.appendChild(frame);
      }
      isOpen = true;
      session.set(openKey, '1');
      render();
      if (focus) tellFocus();
    }

    function tellFocus() {
      frame.focus();
      frame.contentWindow.postMessage({ type: 'assistant-widget:focus' }, origin);
    }

    function close() {
      if (!isOpen) return;
      isOpen = false;
      session.set(openKey, null);
      render();
      launcher.focus();
    }

    launcher.addEventListener('click', function () { if (isOpen) close(); else open(true); });
    document.addEventListener('keydown', function (e) { if (e.key === 'Escape' && isOpen) close(); });
    window.addEventListener('message', function (e) {
      if (!frame || e.origin !== origin || e.source !== frame.contentWindow) return;
      if (e.data && e.data.type === 'assistant-widget:close') close();
    });
    if (narrow.addEventListener) narrow.addEventListener('change', place);

    render();
    document.body.appendChild(launcher);
    if (teaser) document.body.appendChild(teaser);
    if (session.get(openKey)) open(false);
  }

  settings(0);
})();
