import { object, oneOf, text, type Rule } from './rules.js';

/**
 * How the chat widget looks: the assistant's default (its `widget` setting) and the `data-*`
 * attributes of the script tag, which override it one by one. Every value is untrusted (a page's
 * attribute, an owner's setting): colours are `#rgb` or `#rrggbb` only (nothing else reaches CSS),
 * the avatar an http(s) URL (set as an image's `src`, never in CSS), and the title text (set as
 * text, never as markup).
 */

export const WIDGET_POSITIONS = ['bottom-right', 'bottom-left'] as const;
/** `message`: the greeting is the chat's first message; `teaser`: it is also shown by the launcher until the chat is opened or the teaser dismissed. */
export const WIDGET_GREETINGS = ['message', 'teaser'] as const;
export const WIDGET_TITLE_MAX = 60;
export const WIDGET_URL_MAX = 2048;
export const WIDGET_COLOR = /^#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/;

export interface WidgetAppearance {
  title?: string;
  color?: string;
  text_color?: string;
  avatar_url?: string;
  position?: (typeof WIDGET_POSITIONS)[number];
  greeting?: (typeof WIDGET_GREETINGS)[number];
}

const colorMessage = 'The :attribute must be a colour written #rgb or #rrggbb.';

/** The assistant's `widget` setting (every key optional; null on update clears it). */
export const widgetRule = (options: { optional?: boolean; nullable?: boolean } = {}): Rule =>
  object(
    {
      title: text({ optional: true, max: WIDGET_TITLE_MAX, notBlank: true, description: 'Header of the chat panel. Default "Chat with us".' }),
      color: text({ optional: true, pattern: WIDGET_COLOR, patternMessage: colorMessage, description: 'Primary colour (launcher, header, your messages), #rgb or #rrggbb. Default #2f5bea.' }),
      text_color: text({ optional: true, pattern: WIDGET_COLOR, patternMessage: colorMessage, description: 'Text on the primary colour, #rgb or #rrggbb. Default: white or near-black, whichever contrasts more.' }),
      avatar_url: text({ optional: true, max: WIDGET_URL_MAX, pattern: /^https?:\/\/[^\s]+$/i, patternMessage: 'The :attribute must be an http or https URL.', description: "The assistant's picture (http or https URL), shown in the header." }),
      position: oneOf(WIDGET_POSITIONS, { optional: true, description: 'Corner of the launcher: bottom-right (default) or bottom-left.' }),
      greeting: oneOf(WIDGET_GREETINGS, { optional: true, description: "message (default): the assistant's initial message opens the chat; teaser: it is also shown by the launcher until the chat is opened." }),
    },
    { ...options, description: 'How the embeddable chat widget looks by default; the data-* attributes of its script tag override each key.' },
  );

/** An avatar URL a widget may show: http(s), parsed, without credentials. */
export function safeAvatarUrl(value: string): string | undefined {
  if (value.length > WIDGET_URL_MAX || !URL.canParse(value)) return undefined;
  const url = new URL(value);
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) return undefined;
  return url.href;
}
