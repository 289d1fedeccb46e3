import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Twilio's request signature (`X-Twilio-Signature`), shared by its voice webhooks and its
 * messaging webhooks: base64 HMAC-SHA1, keyed with the account's auth token, of the full URL the
 * request was sent to followed by each POST parameter's name and value, sorted by name (repeated
 * names in the order sent).
 */
export function twilioSignature(authToken: string, url: string, params: URLSearchParams): string {
  // Grouped in one pass: getAll per name scans every pair, quadratic in an unauthenticated body's fields.
  const byName = new Map<string, string[]>();
  for (const [name, value] of params) {
    const values = byName.get(name);
    if (values) values.push(value);
    else byName.set(name, [value]);
  }
  const hmac = createHmac('sha1', authToken).update(url);
  for (const name of [...byName.keys()].sort()) for (const value of byName.get(name)!) hmac.update(name + value);
  return hmac.digest('base64');
}

/** Whether `given` (the header's value; undefined when absent) is Twilio's signature of this request, compared in constant time. */
export function twilioSignatureMatches(authToken: string, url: string, params: URLSearchParams, given: string | undefined): boolean {
  const expected = Buffer.from(twilioSignature(authToken, url, params));
  const actual = Buffer.from(given ?? '');
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
