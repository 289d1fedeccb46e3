import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

export const ownedNumberRow = z.object({
  id: z.number(),
  phone_number: z.string(),
  country_code: z.string(),
  type: z.enum(['normal', 'sip', 'caller_id']),
  sms_capable: z.boolean(),
  region: z.string(),
  has_active_subscription: z.boolean(),
  carrier: z.string(),
  created_at: z.string(),
});
export type OwnedNumberRow = z.infer<typeof ownedNumberRow>;

export const inventoryRow = z.object({
  phone_number: z.string(),
  phone_number_formatted: z.string(),
  country_code: z.string(),
  region: z.string(),
  price: z.number(),
  billing_price_id: z.string(),
  address_requirements: z.enum(['none', 'local', 'foreign', 'inventory']),
  sms_capable: z.boolean(),
});
export type InventoryRow = z.infer<typeof inventoryRow>;

const ownedColumns = sql.fragment`id, phone_number, country_code, type, sms_capable, region, has_active_subscription, carrier, created_at`;

export async function listOwnedNumbers(db: CommonQueryMethods, userId: number, onlySmsSubscribed = false): Promise<readonly OwnedNumberRow[]> {
  return db.any(sql.type(ownedNumberRow)`
    SELECT ${ownedColumns} FROM phone_numbers
    WHERE user_id = ${userId} ${onlySmsSubscribed ? sql.fragment`AND sms_capable AND has_active_subscription` : sql.fragment``}
    ORDER BY id`);
}

/** The inventory is every number the platform offers; one is purchasable while nobody rents it. */
const notRented = sql.fragment`NOT EXISTS (SELECT 1 FROM phone_numbers p WHERE p.phone_number = i.phone_number AND p.type <> 'caller_id')`;

export async function searchInventory(db: CommonQueryMethods, countryCode: string, contains: string | undefined, limit: number): Promise<readonly InventoryRow[]> {
  return db.any(sql.type(inventoryRow)`
    SELECT phone_number, phone_number_formatted, country_code, region, price, billing_price_id, address_requirements, sms_capable
    FROM phone_number_inventory i
    WHERE country_code = ${countryCode} ${contains ? sql.fragment`AND strpos(phone_number, ${contains}) > 0` : sql.fragment``} AND ${notRented}
    ORDER BY phone_number LIMIT ${limit}`);
}

/**
 * A number offered and not rented, locked until the transaction ends (so two purchases of it take
 * turns), or null. Released numbers are offered again: the inventory keeps them.
 */
export async function takeFromInventory(db: CommonQueryMethods, phoneNumber: string): Promise<InventoryRow | null> {
  return db.maybeOne(sql.type(inventoryRow)`
    SELECT phone_number, phone_number_formatted, country_code, region, price, billing_price_id, address_requirements, sms_capable
    FROM phone_number_inventory i WHERE phone_number = ${phoneNumber} AND ${notRented} FOR UPDATE`);
}

/** Whether the platform offers or rents out this number (nobody may use it as their own caller ID). */
export async function platformNumber(db: CommonQueryMethods, phoneNumber: string): Promise<boolean> {
  return db.exists(sql.unsafe`
    SELECT 1 FROM phone_number_inventory WHERE phone_number = ${phoneNumber}
    UNION ALL SELECT 1 FROM phone_numbers WHERE phone_number = ${phoneNumber} AND type <> 'caller_id'`);
}

/** Rented numbers lapsed for longer than `graceDays` are given up (back to the inventory). */
export async function releaseLapsed(db: CommonQueryMethods, graceDays: number): Promise<ReadonlyArray<{ id: number; user_id: number }>> {
  return db.any(sql.type(z.object({ id: z.number(), user_id: z.number() }))`
    DELETE FROM phone_numbers
    WHERE monthly_price > 0 AND NOT has_active_subscription AND paid_until <= now() - make_interval(days => ${graceDays})
    RETURNING id, user_id`);
}

/** The number an outbound call goes out from, and whether it may be used (a rented one must be paid up). */
/** The number an outbound assistant calls from: its carrier, and whether it is paid for. */
export async function callerNumber(db: CommonQueryMethods, id: number) {
  return db.maybeOne(sql.type(z.object({ phone_number: z.string(), carrier: z.string(), usable: z.boolean() }))`
    SELECT phone_number, carrier, (paid_until IS NULL OR has_active_subscription) AS usable FROM phone_numbers WHERE id = ${id}`);
}

/**
 * The inbound assistant answering calls to a rented number of `carrier` (a number that lapsed
 * unpaid answers none; a webhook from another carrier than the number's finds none).
 */
export async function inboundAssistantOf(db: CommonQueryMethods, number: string, carrier: string): Promise<{ id: number; user_id: number } | null> {
  return db.maybeOne(sql.type(z.object({ id: z.number(), user_id: z.number() }))`
    SELECT a.id, a.user_id FROM assistants a JOIN phone_numbers p ON p.id = a.phone_number_id
    WHERE p.phone_number = ${number} AND p.carrier = ${carrier} AND p.type <> 'caller_id' AND a.type = 'inbound'
      AND NOT (p.paid_until IS NOT NULL AND NOT p.has_active_subscription)
    ORDER BY a.id LIMIT 1`);
}

export async function insertOwnedNumber(
  db: CommonQueryMethods,
  input: { userId: number; phoneNumber: string; countryCode: string; type: OwnedNumberRow['type']; smsCapable: boolean; region: string; subscribed: boolean; monthlyPrice: number; carrier: string },
): Promise<OwnedNumberRow | null> {
  return db.maybeOne(sql.type(ownedNumberRow)`
    INSERT INTO phone_numbers (user_id, phone_number, country_code, type, sms_capable, region, has_active_subscription, monthly_price, carrier, paid_until)
    VALUES (${input.userId}, ${input.phoneNumber}, ${input.countryCode}, ${input.type}, ${input.smsCapable}, ${input.region}, ${input.subscribed}, ${input.monthlyPrice}, ${input.carrier},
      ${input.subscribed && input.monthlyPrice > 0 ? sql.fragment`now() + interval '1 month'` : null})
    ON CONFLICT DO NOTHING
    RETURNING ${ownedColumns}`);
}

export async function numberInUse(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  return db.exists(sql.unsafe`SELECT 1 FROM assistants WHERE phone_number_id = ${id} AND user_id = ${userId}`);
}

export async function deleteOwnedNumber(db: CommonQueryMethods, userId: number, id: number): Promise<boolean> {
  const result = await db.query(sql.unsafe`DELETE FROM phone_numbers WHERE id = ${id} AND user_id = ${userId}`);
  return result.rowCount > 0;
}

export async function findOwnedNumberForUpdate(db: CommonQueryMethods, userId: number, id: number): Promise<OwnedNumberRow | null> {
  return db.maybeOne(sql.type(ownedNumberRow)`SELECT ${ownedColumns} FROM phone_numbers WHERE id = ${id} AND user_id = ${userId} FOR UPDATE`);
}

export const assignableRow = ownedNumberRow.pick({ id: true, phone_number: true, country_code: true, type: true }).extend({ assigned_inbound: z.boolean() });

export async function listAssignable(db: CommonQueryMethods, userId: number): Promise<ReadonlyArray<z.infer<typeof assignableRow>>> {
  return db.any(sql.type(assignableRow)`
    SELECT p.id, p.phone_number, p.country_code, p.type,
      EXISTS (SELECT 1 FROM assistants a WHERE a.phone_number_id = p.id AND a.type = 'inbound') AS assigned_inbound
    FROM phone_numbers p WHERE p.user_id = ${userId} ORDER BY p.id`);
}

const dueNumber = z.object({ id: z.number(), user_id: z.number(), phone_number: z.string(), monthly_price: z.number(), paid_until: z.string() });
export type DueNumber = z.infer<typeof dueNumber>;

/** Rented numbers whose paid month is over, lapsed ones included for `graceDays` after it. */
export async function numbersDue(db: CommonQueryMethods, graceDays: number, limit: number): Promise<readonly DueNumber[]> {
  return db.any(sql.type(dueNumber)`
    SELECT id, user_id, phone_number, monthly_price::float8 AS monthly_price, paid_until::text AS paid_until
    FROM phone_numbers
    WHERE paid_until <= now() AND paid_until > now() - make_interval(days => ${graceDays}) AND monthly_price > 0
    ORDER BY paid_until LIMIT ${limit}`);
}

/**
 * Pays the number's next month; false when another renewal came first. An active number's month
 * follows the last; a lapsed one's starts now (it took and placed no calls while lapsed).
 */
export async function extendNumber(db: CommonQueryMethods, number: DueNumber): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    UPDATE phone_numbers
    SET paid_until = CASE WHEN has_active_subscription THEN paid_until ELSE greatest(paid_until, now()) END + interval '1 month', has_active_subscription = true
    WHERE id = ${number.id} AND paid_until = ${number.paid_until}::timestamptz`);
  return result.rowCount > 0;
}

/** The owner could not pay: the number lapses until a renewal succeeds; false when it already had. */
export async function lapseNumber(db: CommonQueryMethods, number: DueNumber): Promise<boolean> {
  const result = await db.query(sql.unsafe`
    UPDATE phone_numbers SET has_active_subscription = false
    WHERE id = ${number.id} AND paid_until = ${number.paid_until}::timestamptz AND has_active_subscription`);
  return result.rowCount > 0;
}
