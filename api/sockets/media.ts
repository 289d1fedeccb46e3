import type uWS from 'uWebSockets.js';
import type { VoiceService } from '../../runtime/calls/live.js';
import { FRAME_SAMPLES, allocSamples } from '../../runtime/voice/audio.js';
import type { MediaCodec, MediaEvent, MediaFormat, OutMessage } from '../../runtime/voice/serializers/types.js';
import type { CallSession } from '../../runtime/voice/session.js';
import type { CallTransport } from '../../runtime/voice/spec.js';
import type { Logger } from '../../runtime/logger.js';
import { guarded } from './guard.js';

/**
 * The one socket every media stream uses, carriers' and browsers' alike: uWS bytes to the
 * format's codec (`runtime/voice/serializers/`), its events to the call registry and the session,
 * and the session's audio and controls back through the codec. A stream names its call either in
 * the upgrade's query string (refused with 401 before it opens) or in a `start` message within
 * 10 s (else closed with 1008, as is a `start` that claims no waiting call). Claiming the call is
 * a statement in PostgreSQL (the call may have been created by another process, which this one
 * takes it over from); what arrives on the socket meanwhile is kept and handed on in order.
 */

/** Regroups incoming audio of any chunk size into whole 20 ms frames of 16 kHz PCM16. */
export class FrameAssembler {
  private pending = allocSamples(FRAME_SAMPLES);
  private filled = 0;

  constructor(private readonly onFrame: (frame: Int16Array) => void) {}

  push(samples: Int16Array): void {
    if (this.filled === 0 && samples.length === FRAME_SAMPLES) {
      this.onFrame(samples);
      return;
    }
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(FRAME_SAMPLES - this.filled, samples.length - offset);
      this.pending.set(samples.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
      if (this.filled === FRAME_SAMPLES) {
        this.onFrame(this.pending);
        this.pending = allocSamples(FRAME_SAMPLES);
        this.filled = 0;
      }
    }
  }
}

/** Outgoing audio is dropped rather than queued without bound when a client stops reading. */
export const MAX_BUFFERED_BYTES = 512 * 1024;

/** How long a stream that names its call in a message may stay open without it. @defaultValue 10 s */
const START_TIMEOUT_MS = 10_000;

/** What a stream may send while its call is being claimed (a carrier starts sending audio at once); beyond it, dropped. */
const MAX_QUEUED_EVENTS = 500;

interface SocketData {
  readonly codec: MediaCodec;
  session: CallSession | undefined;
  /** The call named in a `start` is being claimed: events wait here (copied), in order. */
  queued: MediaEvent[] | undefined;
  input: { audio(frame: Int16Array): void } | undefined;
  assembler: FrameAssembler | undefined;
  closed: boolean;
  /** The far end said the caller hung up. */
  stopped: boolean;
  startTimer: NodeJS.Timeout | undefined;
}

export interface MediaSocketDeps {
  readonly voice: VoiceService;
  readonly logger: Logger;
  /** Open sockets of this kind, +1 and -1 (metrics). */
  onCount?(delta: number): void;
  readonly startTimeoutMs?: number;
}

export function mediaSocket(app: uWS.TemplatedApp, format: MediaFormat, deps: MediaSocketDeps): void {
  const send = (ws: uWS.WebSocket<SocketData>, message: OutMessage | undefined): void => {
    if (message) ws.send(message.data, message.binary);
  };

  /** The call is claimed: the session gets a transport through the codec, and the caller's audio flows. */
  function join(ws: uWS.WebSocket<SocketData>, data: SocketData, session: CallSession): void {
    data.session = session;
    clearTimeout(data.startTimer);
    const { codec } = data;
    const transport: CallTransport = {
      sendAudio(frame) {
        if (data.closed || ws.getBufferedAmount() > MAX_BUFFERED_BYTES) return;
        send(ws, codec.audio(frame));
      },
      sendMark(name) {
        if (!data.closed) send(ws, codec.mark(name));
      },
      clear() {
        if (!data.closed) send(ws, codec.clear());
      },
      close(reason) {
        if (data.closed) return;
        data.closed = true;
        ws.end(1000, reason ?? 'call ended');
      },
    };
    data.input = deps.voice.attach(session, transport);
    data.assembler = new FrameAssembler((frame) => data.input?.audio(frame));
  }

  /** The socket closed, or a claim failed: `ws` may no longer be touched once `data.closed` is set by `close`. */
  function refuse(ws: uWS.WebSocket<SocketData>, data: SocketData, reason: string): void {
    if (data.closed) return;
    data.closed = true;
    ws.cork(() => ws.end(1008, reason));
  }

  /**
   * Claims the call a `start` names: at once when this process gave out its token, else through
   * PostgreSQL, with what arrives meanwhile waiting in `data.queued`.
   */
  function claimStarted(ws: uWS.WebSocket<SocketData>, data: SocketData, event: Extract<MediaEvent, { type: 'start' }>): void {
    const here = deps.voice.claimHere(event.callId, event.token);
    if (here) {
      join(ws, data, here);
      return;
    }
    data.queued = [];
    deps.voice.claim(event.callId, event.token).then(
      (session) => {
        const queued = data.queued ?? [];
        data.queued = undefined;
        if (!session) {
          deps.logger.warn({ callId: event.callId, carrier: format.name }, 'media stream refused: unknown, used or expired stream token');
          refuse(ws, data, 'invalid stream token');
          return;
        }
        if (data.closed) {
          // Gone while its call was claimed: the call learns it as from a socket that closed.
          session.send({ type: data.stopped ? 'CALLER_HUNG_UP' : 'CONNECTION_LOST' });
          return;
        }
        ws.cork(() => {
          join(ws, data, session);
          for (const waiting of queued) handle(ws, data, waiting);
        });
      },
      (error: unknown) => {
        data.queued = undefined;
        deps.logger.error({ err: error, callId: event.callId, carrier: format.name }, 'the media stream could not claim its call');
        if (data.closed) return;
        data.closed = true;
        ws.cork(() => ws.end(1011, 'internal error'));
      },
    );
  }

  /** One event from the far end, once its call is joined (or while it is claimed: kept for then). */
  function handle(ws: uWS.WebSocket<SocketData>, data: SocketData, event: MediaEvent): void {
    if (data.queued) {
      if (event.type === 'start' || data.queued.length >= MAX_QUEUED_EVENTS) return;
      data.queued.push(event.type === 'audio' ? { type: 'audio', samples: event.samples.slice() } : event);
      if (event.type === 'stop') data.stopped = true;
      return;
    }
    switch (event.type) {
      case 'audio':
        data.assembler?.push(event.samples);
        return;
      case 'start':
        if (data.session || format.claim !== 'start') return;
        claimStarted(ws, data, event);
        return;
      case 'mark':
        data.session?.mark(event.name);
        return;
      case 'dtmf':
        data.session?.dtmf(event.digit);
        return;
      case 'stop':
        data.stopped = true;
        data.session?.send({ type: 'CALLER_HUNG_UP' });
        return;
      case 'reply':
        ws.send(event.message);
    }
  }

  const socketData = (codec: MediaCodec, session: CallSession | undefined): SocketData => ({ codec, session, queued: undefined, input: undefined, assembler: undefined, closed: false, stopped: false, startTimer: undefined });

  app.ws<SocketData>(format.path, guarded(deps.logger, format.name, {
    maxPayloadLength: 64 * 1024,
    idleTimeout: 60,
    sendPingsAutomatically: true,
    upgrade(res, req, context) {
      const key = req.getHeader('sec-websocket-key');
      const protocol = req.getHeader('sec-websocket-protocol');
      const extensions = req.getHeader('sec-websocket-extensions');
      if (format.claim !== 'query') {
        res.upgrade<SocketData>(socketData(format.codec(), undefined), key, protocol, extensions, context);
        return;
      }
      const query = new URLSearchParams(req.getQuery() ?? '');
      const here = deps.voice.claimHere(Number(query.get('call_id')), query.get('token') ?? '');
      if (here) {
        res.upgrade<SocketData>(socketData(format.codec(), here), key, protocol, extensions, context);
        return;
      }
      let aborted = false;
      res.onAborted(() => (aborted = true));
      deps.voice.claim(Number(query.get('call_id')), query.get('token') ?? '').then(
        (session) => {
          if (aborted) {
            // The browser left while its call was claimed.
            session?.send({ type: 'CONNECTION_LOST' });
            return;
          }
          if (!session) {
            res.cork(() => res.writeStatus('401 Unauthorized').writeHeader('Content-Type', 'application/json').end(JSON.stringify({ message: 'The call token is invalid, used or expired.' })));
            return;
          }
          // Not corked: in this uWS build an upgrade made later, inside cork, can close the new
          // socket at once (1006) when its first frames go out while still corked
          // (uNetworking/uWebSockets#1928, fixed upstream by #1929).
          res.upgrade<SocketData>(socketData(format.codec(), session), key, protocol, extensions, context);
        },
        (error: unknown) => {
          deps.logger.error({ err: error, carrier: format.name }, 'the media stream could not claim its call');
          if (aborted) return;
          res.cork(() => res.writeStatus('503 Service Unavailable').writeHeader('Content-Type', 'application/json').writeHeader('Retry-After', '1').end(JSON.stringify({ message: 'The call could not be joined right now. Please try again.' })));
        },
      );
    },
    open(ws) {
      deps.onCount?.(1);
      const data = ws.getUserData();
      if (data.session) {
        join(ws, data, data.session);
        return;
      }
      data.startTimer = setTimeout(() => {
        if (data.session || data.queued || data.closed) return;
        data.closed = true;
        ws.end(1008, 'no stream start');
      }, deps.startTimeoutMs ?? START_TIMEOUT_MS);
      data.startTimer.unref();
    },
    message(ws, raw, isBinary) {
      const data = ws.getUserData();
      if (data.closed) return;
      const event = data.codec.decode(raw, isBinary);
      if (event) handle(ws, data, event);
    },
    close(ws, code) {
      const data = ws.getUserData();
      clearTimeout(data.startTimer);
      deps.onCount?.(-1);
      const wasClosed = data.closed;
      data.closed = true;
      if (wasClosed || data.stopped || !data.session?.live) return;
      // Which end closed a live call's stream, and how: the call's end follows from it.
      deps.logger.info({ callId: data.session.spec.callId, carrier: format.name, code }, 'the media stream of a live call closed');
      data.session.send({ type: format.hangUpOnClose?.(code) ? 'CALLER_HUNG_UP' : 'CONNECTION_LOST' });
    },
  }));
}
