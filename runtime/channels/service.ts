import type { DatabasePool } from 'slonik';
import { findAssistant } from '../assistants/repository.js';
import { PlatformError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { ChannelInput } from '../../schemas/channels.js';
import { ChannelError } from './errors.js';
import { SealedUnreadable, type Sealer } from './sealing.js';
import {
  channelByVerifyToken,
  deleteChannel,
  findChannel,
  insertChannel,
  listChannels,
  ownedNumber,
  updateChannel,
  type ChannelRow,
  type ChannelType,
  type ChannelWrite,
} from './repository.js';

/** The WhatsApp secrets a channel keeps sealed. */
export interface WhatsAppSecrets {
  readonly access_token: string;
  readonly app_secret: string;
  readonly verify_token: string;
}
const SECRET_NAMES = ['access_token', 'app_secret', 'verify_token'] as const;

/** Where each type's webhooks come to, under the public URL. */
export const WEBHOOK_PATHS: Record<ChannelType, string> = { whatsapp: '/api/channels/whatsapp/webhook', sms: '/api/channels/twilio/sms' };

const WHATSAPP_NUMBER_ID = /^\d{1,32}$/;

const UNREADABLE = "The channel's stored secrets cannot be opened with this server's key (CHANNEL_SECRETS_KEY or DATA_DIR/channel-secrets.key changed): send access_token, app_secret and verify_token again.";

/**
 * @param confirmWhatsApp asks Meta whether the access token reaches the business number (so no
 *   owner can take, or learn of, a number that is not theirs). @throws ChannelError
 */
export function createChannelService(deps: {
  pool: DatabasePool;
  sealer: Sealer;
  logger: Logger;
  publicUrl: () => string;
  smsAvailable: boolean;
  confirmWhatsApp: (phoneNumberId: string, accessToken: string) => Promise<unknown>;
}) {
  const { pool, sealer } = deps;

  function view(row: ChannelRow, phoneNumber: string | null) {
    return {
      id: row.id,
      type: row.type,
      assistant_id: row.assistant_id,
      phone_number_id: row.type === 'sms' ? row.phone_number_id! : row.address,
      phone_number: phoneNumber,
      webhook_url: `${deps.publicUrl()}${WEBHOOK_PATHS[row.type]}`,
      secrets: row.sealed_secrets ? [...SECRET_NAMES] : [],
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }
  const viewOf = (row: ChannelRow) => view(row, row.type === 'sms' ? row.address : null);

  /** The row to write for `input` over `current` (an update keeps what it leaves out). */
  async function written(userId: number, type: ChannelType, input: Partial<ChannelInput>, current?: ChannelRow): Promise<ChannelWrite> {
    const assistantId = input.assistant_id ?? current!.assistant_id;
    if (input.assistant_id !== undefined && !(await findAssistant(pool, userId, input.assistant_id))) throw ValidationError.field('assistant_id', 'The selected assistant id is invalid.');
    if (type === 'sms') {
      for (const name of SECRET_NAMES) if (input[name] !== undefined) throw ValidationError.field(name, `The ${name} field is only for whatsapp channels.`);
      if (!deps.smsAvailable) throw ValidationError.field('type', 'SMS channels send through the platform\'s Twilio account: set TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN.');
      if (input.phone_number_id === undefined) return { assistantId, address: current!.address, phoneNumberId: current!.phone_number_id, sealedSecrets: null, verifyTokenDigest: null };
      const id = input.phone_number_id;
      if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 1) throw ValidationError.field('phone_number_id', 'The phone number id must be the integer id of one of your numbers.');
      const number = await ownedNumber(pool, userId, id);
      if (!number) throw ValidationError.field('phone_number_id', 'The selected phone number id is invalid.');
      if (!number.sms_capable || number.type === 'caller_id') throw ValidationError.field('phone_number_id', 'The selected number cannot receive SMS.');
      if (number.carrier !== 'twilio') throw ValidationError.field('phone_number_id', `SMS channels send through Twilio Messaging: this number is on ${number.carrier}.`);
      return { assistantId, address: number.phone_number, phoneNumberId: number.id, sealedSecrets: null, verifyTokenDigest: null };
    }
    const raw = input.phone_number_id;
    // Meta's ids are 15-16 digits: a JSON number of them is taken only while it is exact.
    const id = typeof raw === 'number' && Number.isSafeInteger(raw) && raw > 0 ? String(raw) : raw ?? current?.address;
    if (typeof id !== 'string' || !WHATSAPP_NUMBER_ID.test(id)) throw ValidationError.field('phone_number_id', "The phone number id must be the WhatsApp Business phone number id (digits, from Meta's WhatsApp Manager).");
    const before = current?.sealed_secrets ? storedSecrets(current.sealed_secrets, input) : undefined;
    const secrets = { access_token: input.access_token ?? before?.access_token, app_secret: input.app_secret ?? before?.app_secret, verify_token: input.verify_token ?? before?.verify_token };
    for (const name of SECRET_NAMES) if (!secrets[name]) throw ValidationError.field(name, `The ${name} field is required for whatsapp channels.`);
    const full = secrets as WhatsAppSecrets;
    if (id !== current?.address || full.access_token !== before?.access_token) await confirmed(id, full.access_token);
    return { assistantId, address: id, phoneNumberId: null, sealedSecrets: sealer.seal(full), verifyTokenDigest: sealer.digest(full.verify_token) };
  }

  /**
   * The channel's secrets as stored, for an update that keeps some. Sealed under a key this server
   * no longer has, they are lost: an update sending all three again replaces them (undefined);
   * one that would keep any is refused, naming what to send.
   */
  function storedSecrets(sealed: Buffer, input: Partial<ChannelInput>): WhatsAppSecrets | undefined {
    try {
      return sealer.open<WhatsAppSecrets>(sealed);
    } catch (error) {
      if (!(error instanceof SealedUnreadable)) throw error;
      const kept = SECRET_NAMES.find((name) => input[name] === undefined);
      if (kept) throw ValidationError.field(kept, UNREADABLE);
      return undefined;
    }
  }

  async function confirmed(phoneNumberId: string, accessToken: string): Promise<void> {
    try {
      await deps.confirmWhatsApp(phoneNumberId, accessToken);
    } catch (error) {
      if (error instanceof ChannelError && !error.retryable) throw ValidationError.field('access_token', `Meta did not confirm the phone number id with this access token: ${error.message}.`);
      throw ValidationError.field('phone_number_id', 'The WhatsApp Cloud API could not be reached to confirm the number. Please try again.');
    }
  }

  const taken = () => ValidationError.field('phone_number_id', 'This number already has a channel.');

  return {
    async create(userId: number, input: ChannelInput) {
      const row = await insertChannel(pool, userId, input.type, await written(userId, input.type, input));
      if (!row) throw taken();
      deps.logger.info({ userId, channelId: row.id, type: row.type }, 'channel created');
      return viewOf(row);
    },

    async list(userId: number) {
      return (await listChannels(pool, userId)).map(viewOf);
    },

    async get(userId: number, id: number) {
      const row = await findChannel(pool, userId, id);
      if (!row) throw new PlatformError('channel_not_found');
      return viewOf(row);
    },

    async update(userId: number, id: number, input: Partial<ChannelInput>) {
      const current = await findChannel(pool, userId, id);
      if (!current) throw new PlatformError('channel_not_found');
      if (input.type !== undefined && input.type !== current.type) throw ValidationError.field('type', 'The type of a channel cannot change; create another channel.');
      const row = await updateChannel(pool, userId, id, await written(userId, current.type, input, current));
      if (row === 'taken') throw taken();
      if (!row) throw new PlatformError('channel_not_found');
      return viewOf(row);
    },

    async remove(userId: number, id: number): Promise<void> {
      if (!(await deleteChannel(pool, userId, id))) throw new PlatformError('channel_not_found');
      deps.logger.info({ userId, channelId: id }, 'channel deleted');
    },

    /** Whether a WhatsApp channel has this verify token (Meta's handshake names no number). */
    async knowsVerifyToken(token: string): Promise<boolean> {
      return (await channelByVerifyToken(pool, sealer.digest(token))) !== null;
    },

    /**
     * A WhatsApp channel's secrets (for its webhooks and its sending).
     * @throws ChannelError (not retryable) when they were sealed under another key: the owner must
     *   enter them again.
     */
    secretsOf(row: ChannelRow): WhatsAppSecrets | undefined {
      if (!row.sealed_secrets) return undefined;
      try {
        return sealer.open<WhatsAppSecrets>(row.sealed_secrets);
      } catch (error) {
        if (!(error instanceof SealedUnreadable)) throw error;
        deps.logger.error({ channelId: row.id, userId: row.user_id }, 'a channel\'s secrets cannot be opened with this server\'s key (CHANNEL_SECRETS_KEY or DATA_DIR/channel-secrets.key changed)');
        throw new ChannelError(UNREADABLE, { retryable: false, cause: error });
      }
    },
  };
}

export type ChannelService = ReturnType<typeof createChannelService>;
