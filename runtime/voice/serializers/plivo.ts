import { Upsampler } from '../audio.js';
import { MediaMessageWriter, decodeMulawJson, type MulawJsonMessage } from './twilio.js';
import type { MediaCodec, MediaEvent, MediaFormat } from './types.js';

/**
 * Plivo's Audio Streams wire format (`plivoFormat`), bidirectional: JSON text messages, the audio
 * 8 kHz mu-law in base64 both ways (`contentType="audio/x-mulaw;rate=8000"` on `<Stream>`).
 *
 * From Plivo: `start` (`start.streamId`, `start.callId`, `start.mediaFormat`), `media`
 * (`media.track`, `media.payload`), `dtmf` (`dtmf.digit`), `playedStream` (`name`: the audio sent
 * before that checkpoint has played) and `clearedAudio`. There is no `stop`: Plivo closes the
 * socket when the call ends. To Plivo: `playAudio` (`media.contentType`, `media.sampleRate`,
 * `media.payload`), `checkpoint` (`streamId`, `name`) and `clearAudio` (`streamId`).
 *
 * The stream's URL names the call (`?call_id=&token=` in the `<Stream>` element's text): Plivo's
 * only other channel, `extraHeaders`, takes letters and digits alone, and the token is base64url.
 * So the socket claims the call at the upgrade, and the agent may speak before `start` names the
 * stream: `playAudio` needs no stream id, and a checkpoint or clear asked for before it is not
 * sent (the playout then waits out its mark timeout; Plivo sends `start` at once on connecting).
 */

/** Everything of an outbound `playAudio` message before its base64 payload. */
const PLAY_AUDIO_LEADING = '{"event":"playAudio","media":{"contentType":"audio/x-mulaw","sampleRate":8000,"payload":"';

interface PlivoMessage extends MulawJsonMessage {
  start?: { streamId?: unknown };
  name?: unknown;
}

function plivoCodec(): MediaCodec {
  const upsampler = new Upsampler();
  const writer = new MediaMessageWriter(PLAY_AUDIO_LEADING);
  let streamId: string | undefined;
  function other(parsed: PlivoMessage): MediaEvent | undefined {
    if (parsed.event === 'start' && typeof parsed.start?.streamId === 'string') streamId = parsed.start.streamId;
    else if (parsed.event === 'playedStream' && typeof parsed.name === 'string') return { type: 'mark', name: parsed.name };
    // `start` (the call is claimed by then) and `clearedAudio` mean nothing more to the call.
    return undefined;
  }
  return {
    decode: (message, isBinary) => decodeMulawJson(message, isBinary, upsampler, other),
    audio: (frame) => ({ data: writer.frame(frame), binary: false }),
    mark: (name) => (streamId === undefined ? undefined : { data: JSON.stringify({ event: 'checkpoint', streamId, name }), binary: false }),
    clear: () => (streamId === undefined ? undefined : { data: JSON.stringify({ event: 'clearAudio', streamId }), binary: false }),
  };
}

/**
 * Plivo Audio Streams, `<Stream bidirectional="true">` with the call's id and token in the URL. A
 * close with a closing handshake is Plivo ending the stream with the call (the caller hung up); a
 * connection dropped without one (1006) is a lost connection.
 */
export const plivoFormat: MediaFormat = { name: 'plivo', path: '/ws/telephony/plivo', claim: 'query', codec: plivoCodec, hangUpOnClose: (code) => code !== 1006 };
