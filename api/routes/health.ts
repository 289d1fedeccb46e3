import { json, type RouteDefinition } from '../http/types.js';

/** `ok`: the database answers; `unavailable`: it does not; `stopping`: a stop has begun (load balancers take the process out). */
export type Health = 'ok' | 'unavailable' | 'stopping';

export function healthRoutes(health: () => Promise<Health>): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/health',
      auth: 'none',
      duringStop: true,
      tag: 'Operations',
      summary: 'Liveness: 200 once the database answers, 503 otherwise and while the server stops',
      async handler() {
        const status = await health();
        return json(status === 'ok' ? 200 : 503, { status });
      },
    },
  ];
}
