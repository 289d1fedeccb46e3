import type uWS from 'uWebSockets.js';
import type { VoiceService } from '../../runtime/calls/live.js';
import { MediaMessageWriter, mediaPayload } from '../../runtime/voice/serializers/twilio.js';
import { Upsampler } from '../../runtime/voice/audio.js';
import type { CallSession, CallTransport } from '../../runtime/voice/session.js';
import type { Logger } from '../../runtime/logger.js';
import { guarded } from './guard.js';
import { FrameAssembler, MAX_BUFFERED_BYTES } from './media.js';

/**
 * Twilio Media Streams (bidirectional) at `GET /ws/telephony/twilio`: the serializer between
 * Twilio's JSON messages (8 kHz mu-law, base64) and the call's PCM16 16 kHz frames. A `start`
 * whose `call_id`/`token` parameters do not claim a waiting call closes the socket (1008).
 * Another carrier with a media-stream socket is one more file like this one.
 */

interface SocketData {
  session: CallSession | undefined;
  streamSid: string;
  input: { audio(frame: Int16Array): void } | undefined;
  assembler: FrameAssembler | undefined;
  upsampler: Upsampler;
  closed: boolean;
  stopped: boolean;
  /** Ends a connection that never says `start` (pings alone would keep it open). */
  startTimer: NodeJS.Timeout | undefined;
}

/** How long a media stream may stay open without `start`. @defaultValue 10 s */
const START_TIMEOUT_MS = 10_000;

interface TwilioMessage {
  event?: string;
  streamSid?: string;
  start?: { streamSid?: string; callSid?: string; customParameters?: Record<string, string> };
  media?: { payload?: string; track?: string };
  mark?: { name?: string };
  dtmf?: { digit?: string };
}

export function twilioMediaSocket(app: uWS.TemplatedApp, deps: { voice: VoiceService; logger: Logger; onCount?: (delta: number) => void; startTimeoutMs?: number }): void {
  app.ws<SocketData>('/ws/telephony/twilio', guarded(deps.logger, 'telephony', {
    maxPayloadLength: 64 * 1024,
    idleTimeout: 60,
    sendPingsAutomatically: true,
    upgrade(res, req, context) {
      res.upgrade<SocketData>(
        { session: undefined, streamSid: '', input: undefined, assembler: undefined, upsampler: new Upsampler(), closed: false, stopped: false, startTimer: undefined },
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open(ws) {
      deps.onCount?.(1);
      const data = ws.getUserData();
      data.startTimer = setTimeout(() => {
        if (data.session || data.closed) return;
        data.closed = true;
        ws.end(1008, 'no stream start');
      }, deps.startTimeoutMs ?? START_TIMEOUT_MS);
      data.startTimer.unref();
    },
    message(ws, raw, isBinary) {
      const data = ws.getUserData();
      if (isBinary || data.closed) return;
      const bytes = Buffer.from(raw);
      if (data.assembler) {
        const payload = mediaPayload(bytes);
        if (payload) {
          data.assembler.push(data.upsampler.processMulaw(payload));
          return;
        }
      }
      let message: TwilioMessage;
      try {
        message = JSON.parse(bytes.toString('utf8')) as TwilioMessage;
      } catch {
        return;
      }
      // Anyone can open this socket: whatever is not an object with the expected fields is ignored.
      if (message === null || typeof message !== 'object') return;
      switch (message.event) {
        case 'start': {
          if (data.session) return;
          const params = (typeof message.start?.customParameters === 'object' && message.start.customParameters) || {};
          const session = deps.voice.claim(Number(params.call_id), String(params.token ?? ''));
          if (!session) {
            deps.logger.warn({ callId: params.call_id }, 'media stream refused: unknown, used or expired stream token');
            data.closed = true;
            ws.end(1008, 'invalid stream token');
            return;
          }
          data.session = session;
          clearTimeout(data.startTimer);
          const streamSid = message.start?.streamSid ?? message.streamSid;
          data.streamSid = typeof streamSid === 'string' ? streamSid : '';
          const writer = new MediaMessageWriter(data.streamSid);
          const transport: CallTransport = {
            sendAudio(frame) {
              if (data.closed || ws.getBufferedAmount() > MAX_BUFFERED_BYTES) return;
              ws.send(writer.frame(frame), false);
            },
            sendMark(name) {
              if (!data.closed) ws.send(JSON.stringify({ event: 'mark', streamSid: data.streamSid, mark: { name } }));
            },
            clear() {
              if (!data.closed) ws.send(JSON.stringify({ event: 'clear', streamSid: data.streamSid }));
            },
            close() {
              if (data.closed) return;
              data.closed = true;
              ws.end(1000, 'call ended');
            },
          };
          data.input = deps.voice.attach(session, transport);
          data.assembler = new FrameAssembler((frame) => data.input?.audio(frame));
          return;
        }
        case 'media':
          if (typeof message.media?.payload === 'string' && data.assembler && (message.media.track ?? 'inbound') === 'inbound') {
            data.assembler.push(data.upsampler.processMulaw(Buffer.from(message.media.payload, 'base64')));
          }
          return;
        case 'mark':
          if (typeof message.mark?.name === 'string') data.session?.mark(message.mark.name);
          return;
        case 'dtmf':
          if (typeof message.dtmf?.digit === 'string') data.session?.dtmf(message.dtmf.digit);
          return;
        case 'stop':
          data.stopped = true;
          data.session?.send({ type: 'CALLER_HUNG_UP' });
          return;
        default:
      }
    },
    close(ws) {
      const data = ws.getUserData();
      clearTimeout(data.startTimer);
      deps.onCount?.(-1);
      const wasClosed = data.closed;
      data.closed = true;
      if (!wasClosed && !data.stopped && data.session?.live) data.session.send({ type: 'CONNECTION_LOST' });
    },
  }));
}
