import { WIDGET_SCRIPT, widgetPage } from '../widget/assets.js';
import type { RouteDefinition } from '../http/types.js';
import { media } from '../http/contract.js';

export function widgetRoutes(assistantExists: (uuid: string) => Promise<boolean>): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/widget.js',
      auth: 'none',
      tag: 'Widget',
      summary: 'The embeddable chat bubble: <script src="/widget.js" data-assistant-id="UUID">',
      responses: { 200: media('application/javascript', 'The script') },
      handler: () => ({ status: 200, body: WIDGET_SCRIPT, headers: { 'Content-Type': 'application/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=300' } }),
    },
    {
      method: 'GET',
      path: '/widget/:id',
      auth: 'none',
      tag: 'Widget',
      summary: 'The chat page of an assistant (opened by widget.js in an iframe)',
      responses: { 200: media('text/html', 'The chat page'), 404: media('text/plain', 'No such assistant') },
      async handler(req) {
        const uuid = req.params.id ?? '';
        if (!(await assistantExists(uuid))) {
          return { status: 404, body: 'This chat does not exist.', headers: { 'Content-Type': 'text/plain; charset=utf-8' } };
        }
        return { status: 200, body: widgetPage(uuid), headers: { 'Content-Type': 'text/html; charset=utf-8' } };
      },
    },
  ];
}
