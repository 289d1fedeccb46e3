import { CarrierError } from './types.js';

/** How long a carrier's REST API may take to answer one request. */
const CARRIER_TIMEOUT_MS = 10_000;

/**
 * One request to a carrier's REST API, as every adapter makes it: JSON accepted, a time limit,
 * and a refusal as a CarrierError with the HTTP status and the carrier's own words (`detail` picks
 * them out of its error body; the message reaches the call's owner, never the public).
 * @returns the JSON body; empty for a 204 or a body that is not JSON.
 */
export async function carrierRequest(
  url: string,
  init: { readonly method: string; readonly headers: Readonly<Record<string, string>>; readonly body?: string },
  detail: (body: Record<string, unknown>) => unknown,
): Promise<Record<string, unknown>> {
  let response: Response;
  try {
    response = await fetch(url, { method: init.method, headers: { accept: 'application/json', ...init.headers }, body: init.body, signal: AbortSignal.timeout(CARRIER_TIMEOUT_MS) });
  } catch (cause) {
    throw new CarrierError('The carrier could not be reached', { cause });
  }
  const json = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok) {
    const words = detail(json);
    throw new CarrierError(`The carrier refused the request (HTTP ${response.status}${typeof words === 'string' && words ? `: ${words}` : ''})`);
  }
  return json;
}

/** A number as Plivo and Vonage write it: E.164 digits without the `+`. */
export const bareNumber = (e164: string): string => e164.replace(/^\+/, '');

/** A number from a carrier that writes it bare, as the platform writes it (`+` and digits); anything else (`Unknown`, a SIP URI) as it came. */
export const plusNumber = (number: string): string => (/^\d{6,15}$/.test(number) ? `+${number}` : number);
