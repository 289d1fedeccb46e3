import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { storableJson, storableText } from '../store/text.js';

/**
 * Every statement about channels and their settings. The inbox (inbox.ts) and the outbox
 * (outbox.ts) keep their own statements in `inboxStore.ts` and `outboxStore.ts`.
 */

export const CHANNEL_TYPES = ['whatsapp', 'sms'] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];

export const channelRow = z.object({
  id: z.number(),
  user_id: z.number(),
  assistant_id: z.number(),
  type: z.enum(CHANNEL_TYPES),
  address: z.string(),
  phone_number_id: z.number().nullable(),
  sealed_secrets: z.instanceof(Buffer).nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ChannelRow = z.infer<typeof channelRow>;

const columns = sql.fragment`id, user_id, assistant_id, type, address, phone_number_id, sealed_secrets, created_at, updated_at`;

export interface ChannelWrite {
  readonly assistantId: number;
  readonly address: string;
  readonly phoneNumberId: number | null;
  readonly sealedSecrets: Buffer | null;
  readonly verifyTokenDigest: Buffer | null;
}

/** @returns null when the type and address already have a channel (anyone's). */
export async function insertChannel(db: CommonQueryMethods, userId: number, type: ChannelType, input: ChannelWrite): Promise<ChannelRow | null> {
  return db.maybeOne(sql.type(channelRow)`
    INSERT INTO channels (user_id, assistant_id, type, address, phone_number_id, sealed_secrets, verify_token_digest)
    VALUES (${userId}, ${input.assistantId}, ${type}, ${input.address}, ${input.phoneNumberId},
      ${input.sealedSecrets && sql.binary(input.sealedSecrets)}, ${input.verifyTokenDigest && sql.binary(input.verifyTokenDigest)})
    ON CONFLICT (type, address) DO NOTHING
    RETURNING ${columns}`);
}

/** @returns the row; null when it is not the user's; 'taken' when the new address has another channel. */
export async function updateChannel(db: CommonQueryMethods, userId: number, id: number, input: ChannelWrite): Promise<ChannelRow | null | 'taken'> {
  const clash = await db.exists(sql.unsafe`
    SELECT 1 FROM channels c WHERE c.address = ${input.address} AND c.id <> ${id}
      AND c.type = (SELECT type FROM channels WHERE id = ${id} AND user_id = ${userId})`);
  if (clash) return 'taken';
  return db.maybeOne(sql.type(channelRow)`
    UPDATE channels SET assistant_id = ${input.assistantId}, address = ${input.address}, phone_number_id = ${input.phoneNumberId},
      sealed_secrets = ${input.sealedSecrets && sql.binary(input.sealedSecrets)},
      verify_token_digest = ${input.verifyTokenDigest && sql.binary(input.verifyTokenDigest)}, updated_at = now()
    WHERE id = ${id} AND user_id = ${userId}
    RETURNING ${columns}`);
}

export async function findChannel(db: CommonQueryMethods, userId: number, id: number): Promise<ChannelRow | null> {
  return db.maybeOne(sql.type(channelRow)`SELECT ${columns} FROM channels WHERE id = ${id} AND user_id = ${userId}`);
}

export async function channelById(db: CommonQueryMethods, id: number): Promise<ChannelRow | null> {
  return db.maybeOne(sql.type(channelRow)`SELECT ${columns} FROM channels WHERE id = ${id}`);
}

export async function listChannels(db: CommonQueryMethods, userId: number): Promise<readonly ChannelRow[]> {
  return db.any(sql.type(channelRow)`SELECT ${columns} FROM channels WHERE user_id = ${userId} ORDER BY id`);
}

export async function deleteChannel(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  const result = await db.query(sql.unsafe`DELETE FROM channels WHERE id = ${id} AND user_id = ${userId}`);
  return result.rowCount > 0;
}

/** The channels of these addresses (a webhook names the numbers it is about). */
export async function channelsByAddress(db: CommonQueryMethods, type: ChannelType, addresses: readonly string[]): Promise<readonly ChannelRow[]> {
  if (addresses.length === 0) return [];
  return db.any(sql.type(channelRow)`SELECT ${columns} FROM channels WHERE type = ${type} AND address = ANY(${sql.array(addresses, 'text')})`);
}

export async function channelByVerifyToken(db: CommonQueryMethods, digest: Buffer): Promise<ChannelRow | null> {
  return db.maybeOne(sql.type(channelRow)`SELECT ${columns} FROM channels WHERE type = 'whatsapp' AND verify_token_digest = ${sql.binary(digest)} LIMIT 1`);
}

/** The channel a conversation came from and its customer; null for a conversation of no channel. */
export async function channelOfConversation(db: CommonQueryMethods, conversationId: string): Promise<{ channel: ChannelRow; customer: string } | null> {
  const row = await db.maybeOne(sql.type(channelRow.extend({ customer: z.string() }))`
    SELECT ch.id, ch.user_id, ch.assistant_id, ch.type, ch.address, ch.phone_number_id, ch.sealed_secrets, ch.created_at, ch.updated_at, c.customer_phone AS customer
    FROM conversations c JOIN channels ch ON ch.id = c.channel_id WHERE c.id = ${conversationId} AND c.customer_phone IS NOT NULL`);
  if (!row) return null;
  const { customer, ...channel } = row;
  return { channel, customer };
}

const numberRow = z.object({ id: z.number(), phone_number: z.string(), sms_capable: z.boolean(), type: z.string(), carrier: z.string() });

/** One of the user's numbers, for an SMS channel. */
export async function ownedNumber(db: CommonQueryMethods, userId: number, id: number) {
  return db.maybeOne(sql.type(numberRow)`SELECT id, phone_number, sms_capable, type, carrier FROM phone_numbers WHERE id = ${id} AND user_id = ${userId}`);
}

/** Whether an SMS channel's number is paid for (a rented number that lapsed unpaid answers nothing, as for calls). */
export async function numberPaidUp(db: CommonQueryMethods, phoneNumberId: number): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM phone_numbers WHERE id = ${phoneNumberId} AND (paid_until IS NULL OR has_active_subscription)`);
}

/** Whether the owner's do-not-contact list (the campaigns' do-not-call list) has the number. */
export async function optedOut(db: CommonQueryMethods, userId: number, phone: string): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM do_not_call WHERE user_id = ${userId} AND phone_number = ${phone}`);
}

/** STOP puts the number on the owner's list; START takes it off. */
export async function setOptedOut(db: CommonQueryMethods, userId: number, phone: string, out: boolean): Promise<void> {
  if (out) await db.query(sql.unsafe`INSERT INTO do_not_call (user_id, phone_number) VALUES (${userId}, ${phone}) ON CONFLICT DO NOTHING`);
  else await db.query(sql.unsafe`DELETE FROM do_not_call WHERE user_id = ${userId} AND phone_number = ${phone}`);
}

/**
 * Queues an owner's webhook event other than `call.ended` (their assistant's webhook, when active):
 * the worker signs and delivers it as it does calls' ones.
 * @returns whether one was queued.
 */
export async function enqueueAssistantEvent(db: CommonQueryMethods, assistantId: number, event: string, payload: Record<string, unknown>): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    INSERT INTO webhook_deliveries (user_id, assistant_id, event, url, body)
    SELECT a.user_id, a.id, ${event}, a.webhook_url, ${storableText(JSON.stringify(storableJson({ event, ...payload })))}
    FROM assistants a WHERE a.id = ${assistantId} AND a.is_webhook_active AND a.webhook_url IS NOT NULL`);
  return result.rowCount > 0;
}
