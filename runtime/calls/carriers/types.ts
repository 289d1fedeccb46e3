/**
 * Carriers place outbound calls and act on live ones. A call's audio comes back over the carrier's
 * media-stream socket, so placing a call means: ask the carrier to dial, and give it the markup
 * that connects the answered call to the stream. One file per carrier beside this one.
 */

export interface PlaceCallRequest {
  readonly callId: number;
  readonly to: string;
  readonly from: string;
  /** TwiML that connects the answered call to the media stream. */
  readonly twiml: string;
  readonly streamUrl: string;
  readonly token: string;
  /** Where the carrier posts status changes. */
  readonly statusUrl: string;
}

export interface Carrier {
  readonly name: string;
  /** @throws CarrierError when the carrier refuses the call. */
  place(request: PlaceCallRequest): Promise<{ carrierCallId: string }>;
  /** Redirects the live call to `number`. (Hanging up an answered call needs no carrier call: closing the media stream ends the TwiML, and the call.) */
  transfer(carrierCallId: string, number: string): Promise<void>;
  /**
   * Ends a call the platform gave up on before it was answered: an outbound one still ringing
   * (`ringing`: the callee's phone stops), or one whose media stream never connected.
   */
  hangUp(carrierCallId: string, state: 'ringing' | 'connected'): Promise<void>;
}

export class CarrierError extends Error {
  override readonly name = 'CarrierError';
}
