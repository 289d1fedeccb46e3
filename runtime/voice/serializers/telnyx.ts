import { Upsampler } from '../audio.js';
import { MediaMessageWriter, decodeMulawJson } from './twilio.js';
import type { MediaCodec, MediaFormat } from './types.js';

/**
 * Telnyx's media-streaming wire format (`telnyxFormat`), bidirectional in `rtp` mode: JSON text
 * messages, the audio 8 kHz mu-law (PCMU) in base64 both ways.
 *
 * From Telnyx: `connected`, `start` (`stream_id`, `start.call_control_id`, `start.media_format`),
 * `media` (`media.track`, `media.payload`), `dtmf` (`dtmf.digit`), `mark` (`mark.name`, once the
 * audio sent before it has played), `error`, `stop`. To Telnyx: `media` (`media.payload`), `mark`
 * and `clear`. The stream's URL names the call (`?call_id=&token=` in `<Stream url>`): TeXML's
 * `<Stream>` documents no custom parameters, so the socket checks the claim at the upgrade.
 *
 * PCMU rather than L16: TeXML's `bidirectionalCodec` offers PCMU, PCMA, G722, OPUS and AMR-WB (16
 * kHz linear PCM is a Call Control option only), and mu-law is what every call leg carries anyway.
 */

/** Everything of an outbound `media` message before its base64 payload. */
const MEDIA_LEADING = '{"event":"media","media":{"payload":"';

function telnyxCodec(): MediaCodec {
  const upsampler = new Upsampler();
  const writer = new MediaMessageWriter(MEDIA_LEADING);
  return {
    // `connected`, `start` (the call is claimed by then) and `error` mean nothing to the call.
    decode: (message, isBinary) => decodeMulawJson(message, isBinary, upsampler),
    audio: (frame) => ({ data: writer.frame(frame), binary: false }),
    mark: (name) => ({ data: JSON.stringify({ event: 'mark', mark: { name } }), binary: false }),
    clear: () => ({ data: '{"event":"clear"}', binary: false }),
  };
}

/** Telnyx media streaming, `<Connect><Stream bidirectionalMode="rtp">` with the call's id and token in the URL. */
export const telnyxFormat: MediaFormat = { name: 'telnyx', path: '/ws/telephony/telnyx', claim: 'query', codec: telnyxCodec };
