/**
 * A media stream's wire format, both ways: what a message on the socket means, and the messages
 * that carry the agent's audio and controls back. One file per carrier (and one for browsers);
 * the socket (`api/sockets/media.ts`), the call registry and the session know nothing of any of
 * them. A codec is made per connection, since decoding keeps state (resamplers, the stream's id).
 */

/** What one message from the far end means. Audio is 16 kHz PCM16 mono, any length. */
export type MediaEvent =
  /** The stream names the call it carries (when the carrier says so in a message, not in the URL). */
  | { readonly type: 'start'; readonly callId: number; readonly token: string; readonly streamId: string }
  /** The caller's audio; valid until the next `decode` (the socket copies what it keeps). */
  | { readonly type: 'audio'; readonly samples: Int16Array }
  /** The far end has played everything sent before the mark of this name. */
  | { readonly type: 'mark'; readonly name: string }
  | { readonly type: 'dtmf'; readonly digit: string }
  /** The caller hung up (the carrier ends the stream). */
  | { readonly type: 'stop' }
  /** Something the far end should be told (a browser's malformed frame). */
  | { readonly type: 'reply'; readonly message: string };

/** One message to send: text, or binary. */
export interface OutMessage {
  readonly data: string | Uint8Array;
  readonly binary: boolean;
}

export interface MediaCodec {
  /** One message from the socket; undefined for those that mean nothing to the call (keep-alives, echoes). */
  decode(message: ArrayBuffer, isBinary: boolean): MediaEvent | undefined;
  /**
   * One 20 ms frame of the agent's audio (16 kHz PCM16) as the far end takes it. The message may be
   * a buffer reused for every frame: valid until the next call (the socket copies what it sends).
   */
  audio(frame: Int16Array): OutMessage;
  /**
   * A mark the far end echoes once the audio before it has played; undefined when the format has
   * none (the playout then waits out its mark timeout).
   */
  mark(name: string): OutMessage | undefined;
  /** Drop the audio the far end has buffered (the caller interrupted). */
  clear(): OutMessage | undefined;
}

export interface MediaFormat {
  /** The carrier's name in logs and metrics (`twilio`, `telnyx`, ...). */
  readonly name: string;
  /** The socket's path, e.g. `/ws/telephony/twilio`. */
  readonly path: string;
  /**
   * Where the stream names its call: in the upgrade's query string (`call_id`, `token`), checked
   * before the socket opens (401 when it does not claim a waiting call), or in a `start` message.
   */
  readonly claim: 'query' | 'start';
  /** A codec for one connection. */
  codec(): MediaCodec;
  /**
   * Whether the socket closing without a `stop` means the caller hung up (a browser's normal
   * close) rather than a lost connection.
   */
  hangUpOnClose?(code: number): boolean;
}
