/**
 * What the platform charges, in USD, in one table.
 * - Conversation messages are charged per user message to the assistant owner (spec section 8):
 *   widget, WhatsApp, SMS and API conversations at 0.01, test conversations free.
 * - Calls are charged per started second from the answer to the hang-up: the platform's price
 *   per minute for the engine mode, plus the carrier's price per minute for the type and country
 *   of the platform number the call uses (web calls have no carrier). One ledger entry per call.
 */
export const prices = {
  conversationMessage: { test: 0, widget: 0.01, whatsapp: 0.01, sms: 0.01, api: 0.01 },
  callPlatformPerMinute: { pipeline: 0.06, multimodal: 0.12, dualplex: 0.09 },
  callCarrierPerMinute: {
    normal: { US: 0.014, CA: 0.014, GB: 0.02, DE: 0.025, FR: 0.025, ES: 0.025, IT: 0.025, NL: 0.025, AU: 0.03, default: 0.04 },
    sip: { default: 0.004 },
    caller_id: { US: 0.014, CA: 0.014, default: 0.04 },
  },
} as const satisfies {
  conversationMessage: Record<'test' | 'widget' | 'whatsapp' | 'sms' | 'api', number>;
  callPlatformPerMinute: Record<'pipeline' | 'multimodal' | 'dualplex', number>;
  callCarrierPerMinute: Record<'normal' | 'sip' | 'caller_id', { default: number } & Record<string, number>>;
};

export type ConversationType = keyof typeof prices.conversationMessage;

export interface CallRate {
  /** USD per second. */
  readonly platform: number;
  readonly carrier: number;
}

export function callRate(mode: keyof typeof prices.callPlatformPerMinute, number: { type: keyof typeof prices.callCarrierPerMinute; country: string } | null): CallRate {
  const carrierTable: Record<string, number> | null = number ? prices.callCarrierPerMinute[number.type] : null;
  const carrier = carrierTable ? carrierTable[number!.country] ?? carrierTable.default! : 0;
  return { platform: prices.callPlatformPerMinute[mode] / 60, carrier: carrier / 60 };
}

/** Costs of a call that lasted `ms` after the answer, billed per started second, rounded to 1e-6 USD. */
export function callCosts(rate: CallRate, ms: number): { seconds: number; carrier: number; total: number } {
  const seconds = Math.max(0, Math.ceil(ms / 1000));
  const round = (value: number) => Math.round(value * 1e6) / 1e6;
  const carrier = round(rate.carrier * seconds);
  return { seconds, carrier, total: round(carrier + rate.platform * seconds) };
}
