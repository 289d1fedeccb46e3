import { timingSafeEqual } from 'node:crypto';
import { Registry } from 'prom-client';
import { PlatformError } from '../../runtime/errors.js';
import { isLoopbackAddress } from '../../runtime/net/addresses.js';
import type { ApiRequest, RouteDefinition } from '../http/types.js';
import { media } from '../http/contract.js';

/** Headers a proxy adds: a request carrying one came from elsewhere, whatever its peer address. */
const FORWARDING_HEADERS = ['x-forwarded-for', 'forwarded', 'x-real-ip'];

/** A request made on this machine, straight to the server: a loopback peer, not forwarded by a proxy. */
function fromThisMachine(req: ApiRequest): boolean {
  return isLoopbackAddress(req.ip) && !FORWARDING_HEADERS.some((name) => name in req.headers);
}

/**
 * `GET /metrics`: with METRICS_TOKEN, for its bearer only (401 otherwise); without it, for
 * requests from this machine only (403 otherwise), so a server reachable from the internet does
 * not show its figures to anyone by default. `scrape`: the exposition, asked for once the request
 * passed those rules (with WORKERS above 1, every server process's figures: api/machine_metrics.ts).
 */
export function metricsRoutes(scrape: () => Promise<string>, token: string | undefined): RouteDefinition[] {
  const expected = token ? Buffer.from(`Bearer ${token}`) : undefined;
  return [
    {
      method: 'GET',
      path: '/metrics',
      auth: 'none',
      tag: 'Operations',
      summary: 'Prometheus metrics (Bearer METRICS_TOKEN when set; otherwise only from this machine)',
      errors: [401, 403],
      responses: { 200: media('text/plain', 'Prometheus text exposition format') },
      async handler(req) {
        if (expected) {
          const given = Buffer.from(req.headers.authorization ?? '');
          if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new PlatformError('unauthenticated');
        } else if (!fromThisMachine(req)) {
          throw new PlatformError('metrics_loopback_only');
        }
        return { status: 200, body: await scrape(), headers: { 'Content-Type': Registry.PROMETHEUS_CONTENT_TYPE } };
      },
    },
  ];
}
