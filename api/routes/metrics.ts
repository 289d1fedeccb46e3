import { timingSafeEqual } from 'node:crypto';
import type { Registry } from 'prom-client';
import { PlatformError } from '../../runtime/errors.js';
import type { RouteDefinition } from '../http/types.js';
import { media } from '../http/contract.js';

export function metricsRoutes(registry: () => Registry, token: string | undefined): RouteDefinition[] {
  const expected = token ? Buffer.from(`Bearer ${token}`) : undefined;
  return [
    {
      method: 'GET',
      path: '/metrics',
      auth: 'none',
      tag: 'Operations',
      summary: 'Prometheus metrics (Bearer METRICS_TOKEN when set)',
      errors: [401],
      responses: { 200: media('text/plain', 'Prometheus text exposition format') },
      async handler(req) {
        if (expected) {
          const given = Buffer.from(req.headers.authorization ?? '');
          if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new PlatformError('unauthenticated');
        }
        const metrics = registry();
        return { status: 200, body: await metrics.metrics(), headers: { 'Content-Type': metrics.contentType } };
      },
    },
  ];
}
