import { ChannelError } from './errors.js';
import type { ChannelRow, ChannelType } from './repository.js';
import type { ChannelService } from './service.js';
import { splitText, type GraphClient } from './whatsapp/wire.js';
import { createTwilioMessaging, splitSms } from './sms/wire.js';

/**
 * What the inbox and the outbox need of each channel's API, behind one interface: how a reply is
 * cut into the parts the channel takes, sending one part, and (WhatsApp) read receipts and media.
 */
export interface ChannelAdapter {
  split(text: string): string[];
  /** @returns the channel's id of the sent message. @throws ChannelError */
  send(channel: ChannelRow, to: string, text: string): Promise<string>;
  markRead?(channel: ChannelRow, messageId: string): Promise<void>;
  media?(channel: ChannelRow, mediaId: string, maxBytes: number): Promise<{ bytes: Buffer; mimeType: string }>;
}

export type ChannelAdapters = Readonly<Record<ChannelType, ChannelAdapter>>;

export interface AdapterSettings {
  /** The platform's Twilio account; without it SMS channels cannot be created (nor sent on). */
  readonly twilio: { readonly accountSid: string; readonly authToken: string; readonly apiUrl: string } | undefined;
  /** Where Twilio reports an SMS's delivery. */
  readonly smsStatusUrl: () => string;
}

export function createChannelAdapters(settings: AdapterSettings, channels: Pick<ChannelService, 'secretsOf'>, graph: GraphClient): ChannelAdapters {
  const token = (channel: ChannelRow): string => {
    const secrets = channels.secretsOf(channel);
    if (!secrets) throw new ChannelError('The WhatsApp channel has no access token', { retryable: false });
    return secrets.access_token;
  };
  const twilio = settings.twilio && createTwilioMessaging(settings.twilio);
  return {
    whatsapp: {
      split: (text) => splitText(text),
      send: async (channel, to, text) => (await graph.sendText(channel.address, token(channel), to, text)).id,
      // Async, so that secrets that cannot be opened reject rather than throw past a caller's catch.
      markRead: async (channel, messageId) => graph.markRead(channel.address, token(channel), messageId),
      media: async (channel, mediaId, maxBytes) => graph.downloadMedia(mediaId, token(channel), maxBytes),
    },
    sms: {
      split: (text) => splitSms(text),
      async send(channel, to, text) {
        if (!twilio) throw new ChannelError('SMS needs the platform\'s Twilio account (TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN)', { retryable: false });
        return (await twilio.send({ from: channel.address, to, body: text, statusCallback: settings.smsStatusUrl() })).sid;
      },
    },
  };
}
