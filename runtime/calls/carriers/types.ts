import type { MediaFormat } from '../../voice/serializers/types.js';

/**
 * Carriers place outbound calls and act on live ones, and answer their own voice webhooks. A
 * call's audio comes back over the carrier's media-stream socket (its `format`), so placing a call
 * means: ask the carrier to dial, with the markup that connects the answered call to the stream.
 * One file per carrier beside this one (its REST API and its markup), one serializer per carrier in
 * `runtime/voice/serializers/`, and one route file per carrier in `api/routes/carriers/`.
 */

export interface PlaceCallRequest {
  readonly callId: number;
  /** The carrier the call records (its number's), which its status callbacks name: a stand-in reports under it. */
  readonly carrier: string;
  readonly to: string;
  readonly from: string;
  /** The media stream the answered call connects to (`wss://…` + the format's path). */
  readonly streamUrl: string;
  /** The one-time token that lets the stream claim the call. */
  readonly token: string;
  /** Where the carrier posts status changes. */
  readonly statusUrl: string;
}

/** How an inbound call's voice webhook is answered; each carrier writes it in its own markup. */
export type InboundAnswer =
  /** Connect the call's audio to the media stream, which claims the call with its id and token. */
  | { readonly kind: 'stream'; readonly streamUrl: string; readonly callId: number; readonly token: string }
  /** Say `text`, then hang up (no assistant on the number, no balance, the server stopping). */
  | { readonly kind: 'refuse'; readonly text: string }
  /** Hang up at once (a webhook repeated for a call that already has its stream). */
  | { readonly kind: 'hangup' };

/** A carrier's status callback, as every carrier's comes down to. */
export type CarrierStatus = 'ringing' | 'answered' | 'busy' | 'no-answer' | 'canceled' | 'failed' | 'completed';

/** The carrier's answering-machine verdict, where it has one. */
export type AnsweredBy = 'human' | 'machine' | 'unknown';

export interface Carrier {
  /** As phone numbers record it: `twilio`, `telnyx`, `plivo`, `vonage` (`loopback` stands in for any). */
  readonly name: string;
  /** The wire format of its media streams (the socket path included). */
  readonly format: MediaFormat;
  /** @throws CarrierError when the carrier refuses the call. */
  place(request: PlaceCallRequest): Promise<{ carrierCallId: string }>;
  /** Redirects the live call to `number`. (Hanging up an answered call needs no carrier call: closing the media stream ends it.) */
  transfer(carrierCallId: string, number: string): Promise<void>;
  /**
   * Ends a call the platform gave up on before it was answered: an outbound one still ringing
   * (`ringing`: the callee's phone stops), or one whose media stream never connected.
   */
  hangUp(carrierCallId: string, state: 'ringing' | 'connected'): Promise<void>;
}

/** A carrier's markup answering its voice webhook (the route of that carrier writes it). */
export interface Markup {
  readonly contentType: string;
  readonly body: string;
}

export class CarrierError extends Error {
  override readonly name = 'CarrierError';
}
