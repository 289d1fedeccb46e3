import type uWS from 'uWebSockets.js';
import type { VoiceService } from '../../runtime/calls/live.js';
import { bytesToSamples, samplesToBytes } from '../../runtime/voice/audio.js';
import type { CallSession, CallTransport } from '../../runtime/voice/session.js';
import type { Logger } from '../../runtime/logger.js';
import { guarded } from './guard.js';
import { FrameAssembler, MAX_BUFFERED_BYTES } from './media.js';

/**
 * Browser calls at `GET /ws/web-call?call_id=..&token=..`. Binary frames both ways are PCM16
 * mono 16 kHz (20 ms = 640 bytes). JSON control frames from the browser: `{type: "mark", name}`
 * (echo of a server mark once the audio before it has played), `{type: "dtmf", digit}`,
 * `{type: "hangup"}`. From the server: `{type: "mark", name}`, `{type: "clear"}` (drop buffered
 * audio: the caller interrupted), `{type: "error", error}`. A missing, wrong, used or expired token
 * is refused at the upgrade with 401.
 */

interface SocketData {
  readonly session: CallSession;
  input: { audio(frame: Int16Array): void } | undefined;
  assembler: FrameAssembler | undefined;
  closed: boolean;
  hungUp: boolean;
}

export function webCallSocket(app: uWS.TemplatedApp, deps: { voice: VoiceService; logger: Logger; onCount?: (delta: number) => void }): void {
  app.ws<SocketData>('/ws/web-call', guarded(deps.logger, 'web_call', {
    maxPayloadLength: 64 * 1024,
    idleTimeout: 60,
    sendPingsAutomatically: true,
    upgrade(res, req, context) {
      const query = new URLSearchParams(req.getQuery() ?? '');
      const session = deps.voice.claim(Number(query.get('call_id')), query.get('token') ?? '');
      if (!session) {
        res.writeStatus('401 Unauthorized').writeHeader('Content-Type', 'application/json').end(JSON.stringify({ message: 'The call token is invalid, used or expired.' }));
        return;
      }
      res.upgrade<SocketData>({ session, input: undefined, assembler: undefined, closed: false, hungUp: false }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
    },
    open(ws) {
      deps.onCount?.(1);
      const data = ws.getUserData();
      const transport: CallTransport = {
        sendAudio(frame) {
          if (!data.closed && ws.getBufferedAmount() <= MAX_BUFFERED_BYTES) ws.send(samplesToBytes(frame), true);
        },
        sendMark(name) {
          if (!data.closed) ws.send(JSON.stringify({ type: 'mark', name }));
        },
        clear() {
          if (!data.closed) ws.send(JSON.stringify({ type: 'clear' }));
        },
        close() {
          if (data.closed) return;
          data.closed = true;
          ws.end(1000, 'call ended');
        },
      };
      data.input = deps.voice.attach(data.session, transport);
      data.assembler = new FrameAssembler((frame) => data.input?.audio(frame));
    },
    message(ws, raw, isBinary) {
      const data = ws.getUserData();
      if (data.closed) return;
      if (isBinary) {
        data.assembler?.push(bytesToSamples(new Uint8Array(raw.slice(0))));
        return;
      }
      let frame: { type?: unknown; name?: unknown; digit?: unknown };
      try {
        frame = JSON.parse(Buffer.from(raw).toString('utf8')) as typeof frame;
      } catch {
        ws.send(JSON.stringify({ type: 'error', error: 'The frame is not valid JSON.' }));
        return;
      }
      if (frame === null || typeof frame !== 'object') frame = {};
      if (frame.type === 'mark' && typeof frame.name === 'string') data.session.mark(frame.name);
      else if (frame.type === 'dtmf' && typeof frame.digit === 'string') data.session.dtmf(frame.digit);
      else if (frame.type === 'hangup') {
        data.hungUp = true;
        data.session.send({ type: 'CALLER_HUNG_UP' });
      } else ws.send(JSON.stringify({ type: 'error', error: 'Unknown frame; send audio as binary PCM16 16 kHz, or {"type": "mark" | "dtmf" | "hangup"}.' }));
    },
    close(ws, code) {
      const data = ws.getUserData();
      deps.onCount?.(-1);
      const wasClosed = data.closed;
      data.closed = true;
      if (wasClosed || !data.session.live) return;
      data.session.send({ type: data.hungUp || code === 1000 || code === 1001 ? 'CALLER_HUNG_UP' : 'CONNECTION_LOST' });
    },
  }));
}
