import type { DatabasePool } from 'slonik';
import { PlatformError } from '../errors.js';
import { listDeliveries, redeliver, rotateWebhookSecret, webhookSecrets, type WebhookSecrets } from './repository.js';

/** What the owner is shown of their signing secrets (the legacy key text stays internal). */
export interface SecretView {
  readonly secret: string;
  readonly previous_secret_expires_at: string | null;
}

const view = (secrets: WebhookSecrets): SecretView => ({ secret: secrets.secret, previous_secret_expires_at: secrets.previous_expires_at });

/** @param secretOverlapMs how long a rotated secret's predecessor goes on signing. */
export function createWebhookService({ pool, secretOverlapMs, onQueued }: { pool: DatabasePool; secretOverlapMs: number; onQueued: () => void }) {
  return {
    secret: async (userId: number) => view(await webhookSecrets(pool, userId)),
    rotateSecret: async (userId: number) => view(await rotateWebhookSecret(pool, userId, secretOverlapMs)),
    deliveries: (userId: number, filters: { callId?: number; status?: string }) => listDeliveries(pool, userId, filters),
    async redeliver(userId: number, id: number): Promise<void> {
      if (!(await redeliver(pool, userId, id))) throw new PlatformError('webhook_delivery_not_found');
      onQueued();
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
