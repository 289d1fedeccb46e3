/**
 * Twilio media-stream message handling shared by the server socket and the phone client: the
 * base64 payload of a `media` message found without parsing the JSON (50 such messages a second
 * per call), and a `media` message written without building an object.
 */

const MEDIA_MARKER = Buffer.from('"event":"media"');
const PAYLOAD_MARKER = Buffer.from('"payload":"');
const OUTBOUND_TRACK = Buffer.from('"track":"outbound"');

/** The decoded payload of a `media` message; undefined for any other message or an outbound-track echo. */
export function mediaPayload(raw: Buffer): Buffer | undefined {
  if (raw.indexOf(MEDIA_MARKER) === -1 || raw.indexOf(OUTBOUND_TRACK) !== -1) return undefined;
  const start = raw.indexOf(PAYLOAD_MARKER);
  if (start === -1) return undefined;
  const from = start + PAYLOAD_MARKER.length;
  const end = raw.indexOf(0x22, from);
  if (end === -1) return undefined;
  return Buffer.from(raw.toString('latin1', from, end), 'base64');
}

/** The leading part of every `media` message of a stream; append the base64 payload and `"}}`. */
export function mediaPrefix(streamSid: string): string {
  return `{"event":"media","streamSid":${JSON.stringify(streamSid)},"media":{"payload":"`;
}
