import { oneOf, text } from './rules.js';
import { compileSchema } from './validator.js';

export const SUPPORTED_COUNTRY_CODES = ['US', 'CA', 'GB', 'AU', 'IL', 'PL', 'FI', 'NL', 'DK', 'IT'] as const;
/** An E.164 number: `+`, country code, subscriber number, 8 to 15 digits in all. */
export const E164 = /^\+[1-9]\d{6,14}$/;
const E164_MESSAGE = 'The phone number must be in E.164 format, e.g. +14155550123.';

export const searchNumbersSchema = compileSchema<{ country_code?: string; contains?: string }>({
  country_code: oneOf(SUPPORTED_COUNTRY_CODES, { optional: true, description: 'ISO 3166-1 alpha-2; default US' }),
  contains: text({ optional: true, max: 10, pattern: /^\d+$/, patternMessage: 'The contains may only contain digits.', description: 'Digits the number contains' }),
});

/** The carriers a number may be rented from or registered with. */
export const CARRIERS = ['twilio', 'telnyx', 'vonage', 'plivo'] as const;

export const phoneNumberSchema = compileSchema<{ phone_number: string; carrier?: (typeof CARRIERS)[number] }>({
  phone_number: text({ max: 16, pattern: E164, patternMessage: E164_MESSAGE }),
  carrier: oneOf(CARRIERS, { optional: true, description: "The carrier the number's calls run through; the platform's default carrier when omitted" }),
});

export const assignableQuerySchema = compileSchema<{ type?: 'inbound' | 'outbound' }>({
  type: oneOf(['inbound', 'outbound'], { optional: true }),
});
