import type { DatabasePool } from 'slonik';
import { PlatformError, ValidationError } from '../errors.js';
import { postLedgerEntry } from '../ledger/service.js';
import type { Logger } from '../logger.js';
import {
  deleteOwnedNumber,
  extendNumber,
  findOwnedNumberForUpdate,
  insertOwnedNumber,
  lapseNumber,
  listAssignable,
  listOwnedNumbers,
  numberInUse,
  numbersDue,
  platformNumber,
  releaseLapsed,
  searchInventory,
  takeFromInventory,
  type InventoryRow,
  type OwnedNumberRow,
} from './repository.js';

/** A lapsed number is renewed when its owner can pay again, for this long after its month ended. */
export const RENEWAL_GRACE_DAYS = 30;

const OWNED_LABELS = { normal: 'Dedicated Number', sip: 'SIP Trunk', caller_id: 'Verified Caller ID' } as const;
const ASSIGNABLE_LABELS = { normal: 'Normal', sip: 'SIP', caller_id: 'Caller ID' } as const;

/** Calling codes to ISO 3166-1 country, longest prefix first; `+1` is reported as US. */
const CALLING_CODES: ReadonlyArray<[string, string]> = [
  ['+358', 'FI'], ['+972', 'IL'], ['+44', 'GB'], ['+61', 'AU'], ['+48', 'PL'], ['+31', 'NL'], ['+45', 'DK'], ['+39', 'IT'],
  ['+49', 'DE'], ['+33', 'FR'], ['+34', 'ES'], ['+41', 'CH'], ['+43', 'AT'], ['+46', 'SE'], ['+47', 'NO'], ['+1', 'US'],
];

export function countryOf(e164: string): string {
  return CALLING_CODES.find(([code]) => e164.startsWith(code))?.[1] ?? 'ZZ';
}

export function ownedNumberView(row: OwnedNumberRow) {
  return {
    id: row.id,
    phone_number: row.phone_number,
    country_code: row.country_code,
    type: row.type,
    type_label: OWNED_LABELS[row.type],
    sms_capable: row.sms_capable,
    region: row.region,
    has_active_subscription: row.has_active_subscription,
    created_at: row.created_at,
  };
}

export function purchasableView(row: InventoryRow) {
  return {
    phone_number: row.phone_number,
    phone_number_formatted: row.phone_number_formatted,
    country_code: row.country_code,
    price: row.price,
    billing_price_id: row.billing_price_id,
    address_requirements: row.address_requirements,
    sms_capable: row.sms_capable,
  };
}

/** @param defaultCarrier what a number rented or registered without naming its carrier records. */
export function createPhoneNumberService({ pool, logger, defaultCarrier }: { pool: DatabasePool; logger: Logger; defaultCarrier: string }) {
  return {
    /**
     * Charges the next month of every rented number whose paid month is over (once per month, by
     * the ledger reference); a number whose owner cannot pay lapses until a later run can.
     */
    async renewDue(): Promise<{ renewed: number[]; lapsed: number[] }> {
      const renewed: number[] = [];
      const lapsed: number[] = [];
      for (const number of await numbersDue(pool, RENEWAL_GRACE_DAYS, 500)) {
        try {
          const paid = await pool.transaction(async (tx) => {
            if (!(await extendNumber(tx, number))) return false;
            await postLedgerEntry(tx, {
              userId: number.user_id,
              amount: -number.monthly_price,
              kind: 'phone_number',
              reference: `${number.id}@${number.paid_until}`,
              reason: `Month from ${number.paid_until.slice(0, 10)} of ${number.phone_number}`,
            });
            return true;
          });
          if (paid) renewed.push(number.id);
        } catch (error) {
          if (!(error instanceof PlatformError && error.code === 'insufficient_balance')) throw error;
          if (await lapseNumber(pool, number)) {
            lapsed.push(number.id);
            logger.warn({ userId: number.user_id, phoneNumberId: number.id }, 'phone number lapsed: the balance does not cover its month');
          }
        }
      }
      if (renewed.length > 0) logger.info({ phoneNumberIds: renewed }, 'phone numbers renewed');
      for (const gone of await releaseLapsed(pool, RENEWAL_GRACE_DAYS)) {
        logger.warn({ userId: gone.user_id, phoneNumberId: gone.id }, `phone number released: unpaid for ${RENEWAL_GRACE_DAYS} days after it lapsed`);
      }
      return { renewed, lapsed };
    },

    async listAll(userId: number) {
      return (await listOwnedNumbers(pool, userId)).map(ownedNumberView);
    },

    /** The legacy list: SMS-capable numbers with an active subscription. */
    async listLegacy(userId: number) {
      return (await listOwnedNumbers(pool, userId, true)).map(ownedNumberView);
    },

    async search(countryCode: string, contains: string | undefined) {
      return (await searchInventory(pool, countryCode, contains, 50)).map(purchasableView);
    },

    /**
     * Rents a number: out of the inventory, first month debited through the ledger, owned by the
     * user, all in one transaction.
     * @throws ValidationError when the number is not available; PlatformError `insufficient_balance` (402).
     */
    /** Rents a number from the inventory, from `carrier` (the platform's default carrier when not said). */
    async purchase(userId: number, phoneNumber: string, carrier: string = defaultCarrier) {
      const row = await pool.transaction(async (tx) => {
        const offer = await takeFromInventory(tx, phoneNumber);
        if (!offer) throw ValidationError.field('phone_number', 'The selected phone number is not available.');
        const owned = await insertOwnedNumber(tx, {
          userId,
          phoneNumber: offer.phone_number,
          countryCode: offer.country_code,
          type: 'normal',
          smsCapable: offer.sms_capable,
          region: offer.region,
          subscribed: true,
          monthlyPrice: offer.price,
          carrier,
        });
        if (!owned) throw ValidationError.field('phone_number', 'The selected phone number is not available.');
        // The reference names the number (`<id>@<month>`, as the renewals' do), so its ledger entry shows it.
        await postLedgerEntry(tx, { userId, amount: -offer.price, kind: 'phone_number', reference: `${owned.id}@purchase`, reason: `First month of ${offer.phone_number}` });
        return owned;
      });
      logger.info({ userId, phoneNumberId: row.id }, 'phone number purchased');
      return ownedNumberView(row);
    },

    /** Registers a number the user owns elsewhere, for outbound caller ID (never one of the platform's). */
    async registerCallerId(userId: number, phoneNumber: string, carrier: string = defaultCarrier) {
      if (await platformNumber(pool, phoneNumber)) throw ValidationError.field('phone_number', 'The phone number is offered by the platform: rent it to call from it.');
      const row = await insertOwnedNumber(pool, {
        userId,
        phoneNumber,
        countryCode: countryOf(phoneNumber),
        type: 'caller_id',
        smsCapable: false,
        region: '',
        subscribed: false,
        monthlyPrice: 0,
        carrier,
      });
      if (!row) throw ValidationError.field('phone_number', 'The phone number has already been taken.');
      return ownedNumberView(row);
    },

    /** @throws ValidationError while an assistant uses the number. */
    async release(userId: number, id: number): Promise<void> {
      await pool.transaction(async (tx) => {
        if (!(await findOwnedNumberForUpdate(tx, userId, id))) throw new PlatformError('phone_number_not_found');
        if (await numberInUse(tx, userId, id)) {
          throw ValidationError.field('phone_number', 'The phone number is used by an assistant. Remove it from the assistant first.');
        }
        await deleteOwnedNumber(tx, userId, id);
      });
      logger.info({ userId, phoneNumberId: id }, 'phone number released');
    },

    /** Spec 4.4: numbers an assistant can use; with `inbound`, caller IDs and taken numbers are left out. */
    async assignable(userId: number, type: 'inbound' | 'outbound' | undefined) {
      const rows = await listAssignable(pool, userId);
      return rows
        .map((row) => ({ row, available: row.type !== 'caller_id' && !row.assigned_inbound }))
        .filter(({ available }) => type !== 'inbound' || available)
        .map(({ row, available }) => ({
          id: row.id,
          phone_number: row.phone_number,
          country_code: row.country_code,
          type_label: ASSIGNABLE_LABELS[row.type],
          is_available: available,
        }));
    },
  };
}

export type PhoneNumberService = ReturnType<typeof createPhoneNumberService>;
