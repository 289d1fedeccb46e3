/**
 * What the platform charges, in USD, in one table. Conversation messages are charged per user
 * message to the assistant owner (spec section 8): widget, WhatsApp and API conversations at
 * 0.01, test conversations free.
 */
export const prices = {
  conversationMessage: { test: 0, widget: 0.01, whatsapp: 0.01, api: 0.01 },
} as const satisfies { conversationMessage: Record<'test' | 'widget' | 'whatsapp' | 'api', number> };

export type ConversationType = keyof typeof prices.conversationMessage;
