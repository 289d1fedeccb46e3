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

const ownedColumns = sql.fragment`id, phone_number, country_code, type, sms_capable, region, has_active_subscription, created_at`;

export async function listOwnedNumbers(db: CommonQueryMethods, userId: number, onlySmsSubscribed = false): Promise<readonly OwnedNumberRow[]> {
  return db.any(sql.type(ownedNumberRow)`
    SELECT ${ownedColumns} FROM phone_numbers
    WHERE user_id = ${userId} ${onlySmsSubscribed ? sql.fragment`AND sms_capable AND has_active_subscription` : sql.fragment``}
    ORDER BY id`);
}

export async function searchInventory(db: CommonQueryMethods, countryCode: string, contains: string | undefined, limit: number): Promise<readonly InventoryRow[]> {
  return db.any(sql.type(inventoryRow)`
    SELECT phone_number, phone_number_formatted, country_code, region, price, billing_price_id, address_requirements, sms_capable
    FROM phone_number_inventory
    WHERE country_code = ${countryCode} ${contains ? sql.fragment`AND strpos(phone_number, ${contains}) > 0` : sql.fragment``}
    ORDER BY phone_number LIMIT ${limit}`);
}

/** Takes a number out of the inventory (row-locked by the delete), or null when it is not there. */
export async function takeFromInventory(db: CommonQueryMethods, phoneNumber: string): Promise<InventoryRow | null> {
  return db.maybeOne(sql.type(inventoryRow)`
    DELETE FROM phone_number_inventory WHERE phone_number = ${phoneNumber}
    RETURNING phone_number, phone_number_formatted, country_code, region, price, billing_price_id, address_requirements, sms_capable`);
}

export async function insertOwnedNumber(
  db: CommonQueryMethods,
  input: { userId: number; phoneNumber: string; countryCode: string; type: OwnedNumberRow['type']; smsCapable: boolean; region: string; subscribed: boolean; monthlyPrice: number },
): Promise<OwnedNumberRow | null> {
  return db.maybeOne(sql.type(ownedNumberRow)`
    INSERT INTO phone_numbers (user_id, phone_number, country_code, type, sms_capable, region, has_active_subscription, monthly_price)
    VALUES (${input.userId}, ${input.phoneNumber}, ${input.countryCode}, ${input.type}, ${input.smsCapable}, ${input.region}, ${input.subscribed}, ${input.monthlyPrice})
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
