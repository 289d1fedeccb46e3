import type { WidgetAppearance } from '../../schemas/widget.js';
import { PlatformError } from '../../runtime/errors.js';
import { LOADER_SCRIPT, widgetPage } from '../widget/page.js';
import { widgetLook } from '../widget/settings.js';
import { json, type ApiResponse, type RouteDefinition } from '../http/types.js';
import { body, media } from '../http/contract.js';
import { array, constant, nullable, object, oneOf, string } from '../../schemas/shapes.js';

const look = object(
  {
    title: string('The panel title (at most 60 characters, shown as text)'),
    color: string('Primary colour, #rgb or #rrggbb'),
    text_color: string('Text colour on the primary colour, #rgb or #rrggbb'),
    avatar_url: nullable(string('Avatar image URL (http or https)')),
    position: oneOf(['bottom-right', 'bottom-left'], 'Corner of the launcher'),
    greeting: oneOf(['message', 'teaser'], 'message: the initial message opens the chat; teaser: it is also shown by the launcher until the chat opens'),
    greeting_text: string("The assistant's initial message, its variables filled in"),
  },
  'The resulting look',
);
const settings = object(
  { status: constant(true, 'Always true on success'), data: look, ignored: array(string('An attribute, e.g. data-color'), 'Attributes given with invalid values, which were ignored') },
  "An assistant's widget settings",
);

/** The assistant's widget default and greeting, or null when no assistant has this UUID. */
export type WidgetSource = (uuid: string) => Promise<{ widget: WidgetAppearance | null; greeting: string } | null>;

/** Query of the page and its settings: the script tag's `data-*` attributes, forwarded by the loader. */
const ATTRIBUTE_QUERY = 'title, color, text-color, avatar, position, greeting';

export function widgetRoutes(widgetOf: WidgetSource): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/widget.js',
      auth: 'none',
      tag: 'Widget',
      summary: 'The embeddable chat launcher: <script src="/widget.js" data-assistant-id="UUID" data-title data-color data-text-color data-avatar data-position data-greeting>',
      responses: { 200: media('application/javascript', 'The script') },
      handler: () => ({ status: 200, body: LOADER_SCRIPT, headers: { 'Content-Type': 'application/javascript; charset=utf-8', 'Cache-Control': 'public, max-age=300' } }),
    },
    {
      method: 'GET',
      path: '/widget/:id/settings',
      auth: 'none',
      family: 'conversation',
      tag: 'Widget',
      summary: `How an assistant's widget looks, the assistant's default overridden by valid attributes in the query (${ATTRIBUTE_QUERY}); invalid ones are named in ignored`,
      responses: { 200: body(settings) },
      async handler(req) {
        const source = await widgetOf(req.params.id ?? '');
        if (!source) throw new PlatformError('assistant_not_found');
        const { look, ignored } = widgetLook(source.widget, req.query);
        return json(200, { status: true, data: { ...look, greeting_text: source.greeting }, ignored });
      },
    },
    {
      method: 'GET',
      path: '/widget/:id',
      auth: 'none',
      tag: 'Widget',
      summary: `The chat panel of an assistant (opened by widget.js in an iframe); the query takes the same attributes as the settings (${ATTRIBUTE_QUERY})`,
      responses: { 200: media('text/html', 'The chat page'), 404: media('text/plain', 'No such assistant') },
      async handler(req): Promise<ApiResponse> {
        const uuid = req.params.id ?? '';
        const source = await widgetOf(uuid);
        if (!source) {
          return { status: 404, body: 'This chat does not exist.', headers: { 'Content-Type': 'text/plain; charset=utf-8' } };
        }
        const { html, csp } = widgetPage(uuid.toLowerCase(), widgetLook(source.widget, req.query).look);
        return { status: 200, body: html, headers: { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': csp, 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' } };
      },
    },
  ];
}
