/*
 * The chat panel (opened by widget.js in an iframe). It keeps the visitor's conversation in this
 * browser (localStorage: its id, which is all the socket needs) and shows its history again after
 * a reload; its socket reconnects after a close with capped exponential backoff and jitter, and
 * asks for what it missed (`?after=<last message id>`). Messages written meanwhile wait and are
 * sent once the socket has caught up; one sent on a socket that closed before the server stored it
 * is shown as not sent, with a retry: none is lost without a word.
 * Every setting arrives as JSON data and is set as text or as an image's src, never as markup.
 */
(function () {
  'use strict';
  var config = JSON.parse(document.getElementById('widget-config').textContent);
  var $ = function (id) { return document.getElementById(id); };
  var log = $('log'), typing = $('typing'), form = $('form'), input = $('input'), sendButton = $('send');
  var statusLine = $('status'), statusText = $('status-text');
  var storageKey = 'assistant-widget:' + config.assistantId;
  var embedded = window.parent !== window;

  var conversationId = null, socket = null, synced = false, lastId = 0, attempt = 0, retryTimer = null;
  var seen = {}; // message ids shown
  var pending = []; // {cid, text, el, note, state: 'queued' | 'sent' | 'confirmed' | 'failed'}
  var streaming = null; // the bubble of the reply being streamed

  document.title = config.title;
  $('title').textContent = config.title;
  var avatar = $('avatar');
  if (config.avatar_url) {
    var img = document.createElement('img');
    img.alt = '';
    img.src = config.avatar_url;
    img.onerror = function () { avatar.textContent = initial(); };
    avatar.appendChild(img);
  } else avatar.textContent = initial();
  if (!embedded) $('close').hidden = true;

  function initial() { return (config.title.trim()[0] || '?').toUpperCase(); }

  function remember(id) { try { if (id) localStorage.setItem(storageKey, id); else localStorage.removeItem(storageKey); } catch (e) { /* storage blocked: the chat lasts as long as the page */ } }
  function recalled() { try { return localStorage.getItem(storageKey); } catch (e) { return null; } }

  function setStatus(online, text) {
    statusLine.className = online ? 'online' : '';
    statusText.textContent = text;
  }

  function scrollDown() { log.scrollTop = log.scrollHeight; }

  /** Appends before the typing indicator, which stays last. */
  function append(el) { log.insertBefore(el, typing); scrollDown(); return el; }

  function bubble(role, text) {
    var el = document.createElement('div');
    el.className = 'msg ' + role;
    el.textContent = text;
    return append(el);
  }

  function notice(text) {
    var el = document.createElement('div');
    el.className = 'notice';
    el.textContent = text;
    return append(el);
  }

  function showTyping(on) {
    typing.hidden = !on;
    if (on) scrollDown();
  }

  function endStream() {
    if (streaming) streaming.remove();
    streaming = null;
  }

  // ---- outgoing messages ----

  function newClientId() { return 'c' + Date.now().toString(36) + Math.random().toString(36).slice(2, 10); }

  function transmit(item) {
    try {
      socket.send(JSON.stringify({ type: 'message', text: item.text, client_id: item.cid }));
      item.state = 'sent';
    } catch (e) {
      item.state = 'queued';
    }
  }

  function flush() {
    if (!synced) return;
    pending.forEach(function (item) { if (item.state === 'queued') transmit(item); });
  }

  function markFailed(item, reason) {
    item.state = 'failed';
    item.el.className = 'msg user failed';
    if (item.note) item.note.remove();
    var note = document.createElement('div');
    note.className = 'note';
    var label = document.createElement('span');
    label.textContent = reason || 'Not sent.';
    var retry = document.createElement('button');
    retry.type = 'button';
    retry.className = 'retry';
    retry.textContent = 'Retry';
    retry.setAttribute('aria-label', 'Retry sending: ' + item.text.slice(0, 60));
    retry.addEventListener('click', function () {
      note.remove();
      item.note = null;
      item.el.className = 'msg user pending';
      item.state = 'queued';
      flush();
      input.focus();
    });
    note.appendChild(label);
    note.appendChild(retry);
    item.note = note;
    item.el.after(note);
    scrollDown();
  }

  function submit(text) {
    var item = { cid: newClientId(), text: text, el: bubble('user pending', text), note: null, state: 'queued' };
    pending.push(item);
    flush();
  }

  // ---- incoming frames ----

  function onStored(frame) {
    if (seen[frame.id]) return;
    seen[frame.id] = true;
    lastId = Math.max(lastId, frame.id);
    if (frame.role === 'user') {
      // Our own message, stored: the first one sent with the same words.
      for (var i = 0; i < pending.length; i++) {
        var item = pending[i];
        if (item.state === 'sent' && item.text === frame.content) {
          item.state = 'confirmed';
          item.el.className = 'msg user';
          pending.splice(i, 1);
          return;
        }
      }
      bubble('user', frame.content);
      return;
    }
    if (streaming) {
      streaming.textContent = frame.content;
      streaming = null;
    } else bubble('assistant', frame.content);
    showTyping(false);
  }

  function onFrame(frame) {
    if (frame.type === 'message') onStored(frame);
    else if (frame.type === 'delta') {
      if (!streaming) streaming = bubble('assistant', '');
      streaming.textContent += frame.text;
      scrollDown();
    } else if (frame.type === 'typing') {
      if (!frame.active) endStream();
      showTyping(frame.active);
    } else if (frame.type === 'synced') {
      synced = true;
      attempt = 0;
      setStatus(true, 'Online');
      // Sent on an earlier socket and not stored: the server never had them.
      pending.forEach(function (item) { if (item.state === 'sent') markFailed(item, 'Not sent.'); });
      flush();
    } else if (frame.type === 'error') {
      var item = null;
      for (var i = 0; i < pending.length; i++) if (pending[i].cid === frame.client_id) item = pending[i];
      if (item && item.state !== 'confirmed') markFailed(item, frame.error);
      else notice(frame.error);
      if (frame.client_id) showTyping(false);
    }
  }

  // ---- the conversation and its socket ----

  function backoff() {
    // 0.5 s doubling to 15 s, each wait drawn from its upper half (jitter): clients a restart
    // disconnected together do not come back together.
    var ceiling = Math.min(15000, 500 * Math.pow(2, attempt));
    attempt++;
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  function later(fn) {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(function () { retryTimer = null; fn(); }, backoff());
  }

  function start() {
    conversationId = recalled();
    if (conversationId) return connect();
    setStatus(false, 'Connecting…');
    fetch('/api/conversations', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ assistant_id: config.assistantId, type: 'widget' }) })
      .then(function (r) {
        return r.json().then(function (body) { return { status: r.status, body: body }; }, function () { return { status: r.status, body: {} }; });
      })
      .then(function (answer) {
        if (answer.body.status && answer.body.conversation_id) {
          conversationId = answer.body.conversation_id;
          remember(conversationId);
          return connect();
        }
        // Busy or stopping (429, 5xx): try again; anything else is the owner's to fix.
        if (answer.status === 429 || answer.status >= 500) return later(start);
        console.warn('Assistant widget: the chat could not start:', answer.body.error || answer.status);
        setStatus(false, 'Unavailable');
        notice('The chat is unavailable right now. Please try again later.');
      })
      .catch(function () { later(start); });
  }

  function connect() {
    setStatus(false, attempt ? 'Reconnecting…' : 'Connecting…');
    var scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
    var ws = new WebSocket(scheme + location.host + '/ws/conversations/' + encodeURIComponent(conversationId) + '?after=' + lastId);
    socket = ws;
    ws.onmessage = function (e) {
      var frame;
      try { frame = JSON.parse(e.data); } catch (err) { return; }
      if (socket === ws) onFrame(frame);
    };
    ws.onclose = function (e) {
      if (socket !== ws) return;
      socket = null;
      synced = false;
      endStream();
      showTyping(false);
      if (e.code === 4404) {
        // The conversation is gone (deleted): start a new one; unsent messages go to it.
        remember(null);
        conversationId = null;
        lastId = 0;
        return start();
      }
      setStatus(false, 'Reconnecting…');
      later(connect);
    };
  }

  window.addEventListener('online', function () {
    if (retryTimer && !socket) {
      clearTimeout(retryTimer);
      retryTimer = null;
      attempt = 0;
      if (conversationId) connect(); else start();
    }
  });

  // ---- the form and the close control ----

  input.addEventListener('input', function () { sendButton.disabled = input.value.trim() === ''; });
  form.addEventListener('submit', function (e) {
    e.preventDefault();
    var text = input.value.trim();
    if (!text) return;
    input.value = '';
    sendButton.disabled = true;
    submit(text);
    input.focus();
  });

  function close() { if (embedded) window.parent.postMessage({ type: 'assistant-widget:close' }, '*'); }
  $('close').addEventListener('click', close);
  document.addEventListener('keydown', function (e) { if (e.key === 'Escape') close(); });
  window.addEventListener('message', function (e) {
    if (e.source === window.parent && e.data && e.data.type === 'assistant-widget:focus') input.focus();
  });

  start();
})();
