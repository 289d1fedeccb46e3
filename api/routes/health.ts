import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { errorBodies, object, oneOf } from '../../schemas/shapes.js';

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
      responses: {
        200: body(object({ status: oneOf(['ok'], 'The database answers') }, 'Healthy')),
        503: body({
          anyOf: [object({ status: oneOf(['unavailable', 'stopping'], 'unavailable: the database does not answer; stopping: a stop has begun') }, 'Not serving'), errorBodies.message],
          description: 'Not serving: the database does not answer, or the server is starting or stopping',
        }),
      },
      async handler() {
        const status = await health();
        return json(status === 'ok' ? 200 : 503, { status });
      },
    },
  ];
}
