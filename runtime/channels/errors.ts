/**
 * A messaging vendor (WhatsApp Cloud API, Twilio Messaging) refused or could not be reached.
 * Whether it is worth retrying is decided here, where the error is made: network failures,
 * timeouts, 429 and 5xx are; any other refusal (4xx: a bad token, a closed 24-hour window) is not,
 * as the same request would be refused again. The message names the HTTP status and the vendor's
 * own words; it is meant for the channel's owner and logs, never the customer.
 */
export class ChannelError extends Error {
  override readonly name = 'ChannelError';
  readonly retryable: boolean;
  /** The vendor's HTTP status; undefined when no answer came (network error, timeout). */
  readonly status?: number;
  /** The vendor's own error code (e.g. Meta's 131047 for a closed 24-hour window), when it gave one. */
  readonly vendorCode?: number;

  constructor(message: string, options: { retryable: boolean; status?: number; vendorCode?: number; cause?: unknown }) {
    super(message, { cause: options.cause });
    this.retryable = options.retryable;
    if (options.status !== undefined) this.status = options.status;
    if (options.vendorCode !== undefined) this.vendorCode = options.vendorCode;
  }
}
