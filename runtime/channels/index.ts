import type { DatabasePool } from 'slonik';
import type { AssistantWithTools } from '../assistants/repository.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { ConversationEngine } from '../conversations/engine.js';
import type { Logger } from '../logger.js';
import type { SweepGate } from '../sweeps.js';
import { createChannelAdapters } from './adapters.js';
import { createAnswering } from './answering.js';
import { ChannelError } from './errors.js';
import { createInbox } from './inbox.js';
import { createOutbox } from './outbox.js';
import { createReceiving } from './receiving.js';
import { optedOut, setOptedOut } from './repository.js';
import { TWILIO_UNSUBSCRIBED } from './sms/wire.js';
import { createGraphClient } from './whatsapp/wire.js';
import { channelSecretsKey, createSealer } from './sealing.js';
import { createChannelService } from './service.js';

/**
 * Messaging channels put together: the owners' channel settings (service.ts), what their webhooks
 * bring (receiving.ts) into the inbox (inbox.ts), answered by the conversation engine
 * (answering.ts), and the outbox (outbox.ts) that sends replies through each channel's API
 * (adapters.ts).
 */

export interface ChannelsDeps {
  readonly pool: DatabasePool;
  readonly config: Pick<Config, 'channels' | 'twilio' | 'dataDir'>;
  readonly engine: ConversationEngine;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly sweeps?: SweepGate;
  readonly publicUrl: () => string;
  readonly wakeWebhooks: () => void;
  readonly transcribe?: (assistant: AssistantWithTools, audio: { bytes: Buffer; mimeType: string }) => Promise<string | undefined>;
  /** How long a process holds a conversation's inbox between renewals (tests shorten it). @defaultValue 60 s */
  readonly inboxLeaseSeconds?: number;
  /** How often abandoned inboxes are looked for (tests lengthen it, to see what else takes them up). @defaultValue 5 s */
  readonly inboxSweepMs?: number;
}

export const SMS_STATUS_PATH = '/api/channels/twilio/sms/status';

export async function createChannels(deps: ChannelsDeps) {
  const { pool, clock, logger } = deps;
  const sealer = createSealer(await channelSecretsKey(deps.config.channels.secretsKey, deps.config.dataDir));
  const graph = createGraphClient({ apiUrl: deps.config.channels.whatsappApiUrl, version: deps.config.channels.whatsappApiVersion });
  const service = createChannelService({ pool, sealer, logger, publicUrl: deps.publicUrl, smsAvailable: deps.config.twilio !== undefined, confirmWhatsApp: (id, token) => graph.phoneNumber(id, token) });
  const adapters = createChannelAdapters({ twilio: deps.config.twilio, smsStatusUrl: () => `${deps.publicUrl()}${SMS_STATUS_PATH}` }, service, graph);
  const outbox = createOutbox({
    pool,
    clock,
    logger,
    async send(part, channel) {
      if (channel.type === 'sms' && (await optedOut(pool, channel.user_id, part.recipient))) throw new ChannelError('Not sent: the customer opted out (STOP)', { retryable: false });
      try {
        return await adapters[channel.type].send(channel, part.recipient, part.body);
      } catch (error) {
        // Twilio says the customer opted out with it (a STOP this platform never saw): the owner's list follows.
        if (channel.type === 'sms' && error instanceof ChannelError && error.vendorCode === TWILIO_UNSUBSCRIBED) await setOptedOut(pool, channel.user_id, part.recipient, true);
        throw error;
      }
    },
  });
  const answering = createAnswering({ pool, engine: deps.engine, adapters, logger, sent: () => outbox.wake(), notified: deps.wakeWebhooks, transcribe: deps.transcribe });
  const inbox = createInbox({ pool, clock, logger, sweeps: deps.sweeps, handle: answering.handle, giveUp: answering.giveUp, leaseSeconds: deps.inboxLeaseSeconds, sweepMs: deps.inboxSweepMs });
  const receiving = createReceiving({ pool, clock, logger, inbox, channels: service });
  return {
    service,
    receiving,
    /** The owner's words in a channel conversation, sent on its channel. */
    reply: answering.reply,
    start(): void {
      outbox.start();
      inbox.start();
    },
    /**
     * Takes up conversations whose messages wait with no live process answering them (every
     * process does so every 5 s; tests call it at once). @returns how many were taken.
     */
    takeAbandoned: () => inbox.sweep(),
    /** The first step of a stop: conversations being answered here give their inbox up after the message at hand. */
    drain(): void {
      inbox.drain();
    },
    /** Conversations being answered here give their inbox up; sends in flight finish. */
    async stop(): Promise<void> {
      await inbox.stop();
      await outbox.stop();
    },
    /** For tests and the stop: resolves once nothing is answered or sent here. */
    async idle(): Promise<void> {
      await inbox.idle();
      await outbox.idle();
    },
  };
}

export type Channels = Awaited<ReturnType<typeof createChannels>>;
