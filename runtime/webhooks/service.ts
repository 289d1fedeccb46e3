import type { DatabasePool } from 'slonik';
import { PlatformError } from '../errors.js';
import { listDeliveries, redeliver, webhookSecret } from './repository.js';

export function createWebhookService({ pool, onQueued }: { pool: DatabasePool; onQueued: () => void }) {
  return {
    secret: (userId: number) => webhookSecret(pool, userId),
    rotateSecret: (userId: number) => webhookSecret(pool, userId, true),
    deliveries: (userId: number, filters: { callId?: number; status?: string }) => listDeliveries(pool, userId, filters),
    async redeliver(userId: number, id: number): Promise<void> {
      if (!(await redeliver(pool, userId, id))) throw new PlatformError('webhook_delivery_not_found');
      onQueued();
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
