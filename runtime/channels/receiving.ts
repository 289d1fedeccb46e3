import type { DatabasePool } from 'slonik';
import type { Clock } from '../clock.js';
import { PlatformError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Inbox } from './inbox.js';
import type { InboundInput } from './inboxStore.js';
import { applyStatus } from './outboxStore.js';
import { ChannelError } from './errors.js';
import { channelsByAddress, type ChannelRow } from './repository.js';
import type { ChannelService } from './service.js';
import { inboundKeyword, parseInboundSms, parseStatusCallback } from './sms/wire.js';
import { parseWebhook, verifyHubSignature, type InboundMessage } from './whatsapp/wire.js';

/**
 * What the channels' webhooks bring, past their transport: WhatsApp's verification handshake, its
 * signed notifications (messages and statuses), Twilio's incoming SMS and its status callbacks
 * (their signature is checked by the route, with the platform's Twilio auth token). Messages go to
 * the inbox; statuses move the outbox's parts.
 */

/** Kinds of WhatsApp messages that carry words the customer chose (a typed text, a tapped button). */
const TEXT_KINDS = new Set(['text', 'interactive', 'button']);

export function createReceiving(deps: { pool: DatabasePool; clock: Clock; logger: Logger; inbox: Inbox; channels: Pick<ChannelService, 'secretsOf' | 'knowsVerifyToken'> }) {
  const { pool, logger, inbox } = deps;

  function whatsappInput(message: InboundMessage): InboundInput {
    const chosen = TEXT_KINDS.has(message.kind) ? message.text?.trim() : undefined;
    // A photo or a file with a caption is answered by its caption (the assistant reads no image).
    const caption = message.caption?.trim();
    const text = chosen || (caption ? `[${message.kind}] ${caption}` : undefined);
    return {
      customer: message.from,
      externalId: message.id,
      kind: text ? 'text' : message.kind,
      body: text || `[${message.kind}]`,
      media: message.media ? { id: message.media.id, mime_type: message.media.mimeType ?? null } : undefined,
      customerName: message.profileName,
      at: deps.clock.now(),
    };
  }

  /** The channel's app secret; none when its secrets cannot be opened (logged by `secretsOf`), so nothing it is sent can be checked. */
  function appSecret(channel: ChannelRow): string | undefined {
    try {
      return deps.channels.secretsOf(channel)?.app_secret;
    } catch (error) {
      if (error instanceof ChannelError) return undefined;
      throw error;
    }
  }

  return {
    /**
     * Meta's subscription handshake: the challenge echoed when the verify token is a channel's.
     * @returns the challenge; null when the token is no channel's (the route answers 403).
     */
    async whatsappChallenge(mode: string | undefined, token: string | undefined, challenge: string | undefined): Promise<string | null> {
      if (mode !== 'subscribe' || !token || challenge === undefined) return null;
      return (await deps.channels.knowsVerifyToken(token)) ? challenge : null;
    },

    /**
     * A WhatsApp notification: its signature must match the app secret of every channel it names
     * (a body naming none of them cannot be checked, and is refused alike).
     * @throws PlatformError `channel_signature_invalid`
     */
    async whatsappNotification(rawBody: Buffer, signature: string | undefined): Promise<void> {
      let body: unknown;
      try {
        body = JSON.parse(rawBody.toString('utf8'));
      } catch {
        throw new PlatformError('channel_signature_invalid');
      }
      const notifications = parseWebhook(body);
      const channels = new Map((await channelsByAddress(pool, 'whatsapp', [...new Set(notifications.map((n) => n.phoneNumberId))])).map((row) => [row.address, row]));
      if (channels.size === 0) throw new PlatformError('channel_signature_invalid');
      for (const channel of channels.values()) {
        const secret = appSecret(channel);
        if (!secret || !verifyHubSignature(secret, rawBody, signature)) throw new PlatformError('channel_signature_invalid');
      }
      for (const notification of notifications) {
        const channel = channels.get(notification.phoneNumberId);
        if (!channel) continue;
        for (const message of notification.messages) await inbox.receive(channel, whatsappInput(message));
        for (const status of notification.statuses) {
          const known = await applyStatus(pool, channel.id, status.id, status.status, status.error);
          if (!known) logger.debug({ channelId: channel.id, status: status.status }, 'a status for a message this platform did not send was ignored');
        }
      }
    },

    /**
     * An incoming SMS to a number with a channel (Twilio's form); one to a number without one is
     * ignored. @returns whether a channel took it.
     */
    async sms(params: URLSearchParams): Promise<boolean> {
      const sms = parseInboundSms(params);
      if (!sms) return false;
      const [channel] = await channelsByAddress(pool, 'sms', [sms.to]);
      if (!channel) {
        logger.info({ to: sms.to }, 'an SMS came to a number with no channel');
        return false;
      }
      await inbox.receive(channel, smsInput(sms, deps.clock.now()));
      return true;
    },

    /** Twilio's report on an SMS sent from a channel's number. */
    async smsStatus(params: URLSearchParams): Promise<void> {
      const status = parseStatusCallback(params);
      const from = params.get('From');
      if (!status || !from) return;
      const [channel] = await channelsByAddress(pool, 'sms', [from]);
      if (channel) await applyStatus(pool, channel.id, status.sid, status.status, status.error);
    },
  };
}

function smsInput(sms: NonNullable<ReturnType<typeof parseInboundSms>>, at: number): InboundInput {
  const keyword = inboundKeyword(sms);
  const body = sms.body.trim();
  const kind = keyword ?? (body ? 'text' : sms.mediaCount > 0 ? 'media' : 'text');
  return { customer: sms.from, externalId: sms.sid, kind, body: body || (sms.mediaCount > 0 ? '[media]' : ''), at };
}

export type Receiving = ReturnType<typeof createReceiving>;
