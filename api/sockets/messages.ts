import { boolean, constant, integer, object, oneOf, string, type Schema } from '../../schemas/shapes.js';
import { functionCalls } from '../../schemas/responses.js';

/**
 * The realtime sockets' messages, for the OpenAPI document (`x-websockets`) and its docs page.
 * OpenAPI describes HTTP operations only, so each socket is described here: how it opens, and the
 * JSON frames each side sends, as JSON Schemas keyed by their `type`. Carriers' media streams
 * (`/ws/twilio`, ...) speak the carrier's own protocol and are left to the carrier's documentation.
 */

export interface SocketDoc {
  readonly path: string;
  readonly summary: string;
  /** How the socket opens, and what closes it. */
  readonly description: string;
  /** Frames the client sends, by `type`. */
  readonly client: Readonly<Record<string, Schema>>;
  /** Frames the server sends, by `type`. */
  readonly server: Readonly<Record<string, Schema>>;
}

const errorFrame = object({ type: constant('error', 'Frame type'), error: string('What went wrong; the socket stays open') }, 'A frame could not be taken, or a reply failed');
const clientId = string("The client's own id of a message (1 to 64 of A-Z a-z 0-9 _ -), echoed on that message's errors");

export const SOCKETS: readonly SocketDoc[] = [
  {
    path: '/ws/conversations/{conversation_id}?after={message_id}',
    summary: 'Chat in a conversation in real time (the widget uses it)',
    description:
      'Open after POST /api/conversations. Public, a visitor\'s view: no function calls. Every socket on the conversation receives each stored message, whichever socket or REST request sent it, and the reply as it streams. Too many upgrades per client address (the REST rate limit) or sockets on the conversation are refused with HTTP 429 `{status: false, error}`; an unknown conversation is closed with code 4404 (1011 when it could not be looked up); more than 8 frames before the conversation is found closes with 1008. Frames are JSON text of at most 16 KiB. With `after` (a message id; 0 for the whole history), the socket first sends the messages stored after that one (the latest 200), then `synced`, then live frames without repeats: a widget that reconnects catches up on what it missed.',
    client: {
      message: object({ type: constant('message', 'Frame type'), text: string('What the user says, 1 to 2000 characters'), client_id: clientId }, 'Send a user message', ['client_id']),
    },
    server: {
      delta: object({ type: constant('delta', 'Frame type'), text: string('The next piece of the reply being written') }, 'Part of the reply as it streams'),
      message: object(
        { type: constant('message', 'Frame type'), id: integer('Message id, growing; the `after` of a reconnecting socket'), role: oneOf(['user', 'assistant'], 'Who wrote it'), content: string('The words'), function_calls: { ...functionCalls, description: 'Always empty on this socket (function calls are the owner\'s)' } },
        'A stored message of the conversation (the user\'s and then the reply)',
      ),
      typing: object({ type: constant('typing', 'Frame type'), active: boolean('true when the reply begins, false when it is stored or the turn ends without one') }, 'The assistant is writing a reply'),
      synced: object({ type: constant('synced', 'Frame type'), last_id: integer('The last message id sent in the catch-up') }, 'With `after` only: the catch-up is complete'),
      error: object({ type: constant('error', 'Frame type'), error: string('What went wrong; the socket stays open'), client_id: clientId }, 'A frame could not be taken, or a reply failed; client_id when the frame that failed carried one', ['client_id']),
    },
  },
  {
    path: '/ws/web-call?call_id={call_id}&token={token}',
    summary: 'A browser call: audio both ways (POST /api/web-calls gives the URL)',
    description:
      'Open the websocket_url of POST /api/web-calls within 5 minutes. Binary frames both ways are PCM16 mono 16 kHz little-endian audio (20 ms = 640 bytes); JSON text frames control the call. A wrong or used token is refused with HTTP 401. Closing the socket normally (1000, 1001) hangs up. When the owner hangs the call up (POST /api/user/calls/{id}/hangup) the server closes it with 1000 `call ended by its owner`.',
    client: {
      mark: object({ type: constant('mark', 'Frame type'), name: string('The name of a mark the server sent') }, 'Echo of a server mark once the audio before it has played'),
      dtmf: object({ type: constant('dtmf', 'Frame type'), digit: string('A keypad key: 0-9, * or #') }, 'The caller pressed a key'),
      hangup: object({ type: constant('hangup', 'Frame type') }, 'The caller hangs up'),
    },
    server: {
      mark: object({ type: constant('mark', 'Frame type'), name: string('Name to echo back once the audio sent before it has played') }, 'A point in the outgoing audio'),
      clear: object({ type: constant('clear', 'Frame type') }, 'Drop the audio buffered for playing: the caller interrupted'),
      error: errorFrame,
    },
  },
];
