import { json, type RouteDefinition } from '../http/types.js';

export function healthRoutes(isHealthy: () => Promise<boolean>): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/health',
      auth: 'none',
      tag: 'Operations',
      summary: 'Liveness: 200 once the database answers, 503 otherwise',
      async handler() {
        return (await isHealthy()) ? json(200, { status: 'ok' }) : json(503, { status: 'unavailable' });
      },
    },
  ];
}
