import type { QueryValue } from '../http/types.js';
import { WIDGET_COLOR, WIDGET_GREETINGS, WIDGET_POSITIONS, WIDGET_TITLE_MAX, safeAvatarUrl, type WidgetAppearance } from '../../schemas/widget.js';

/** The widget's look as shown: every key decided. */
export interface WidgetLook {
  readonly title: string;
  readonly color: string;
  readonly text_color: string;
  readonly avatar_url: string | null;
  readonly position: (typeof WIDGET_POSITIONS)[number];
  readonly greeting: (typeof WIDGET_GREETINGS)[number];
}

export const WIDGET_DEFAULTS = { title: 'Chat with us', color: '#2f5bea', position: 'bottom-right', greeting: 'message' } as const;

/**
 * The script tag's attributes, as the loader forwards them in the query (`data-text-color` as
 * `text-color`), and the setting each overrides.
 */
const ATTRIBUTES = { title: 'title', color: 'color', 'text-color': 'text_color', avatar: 'avatar_url', position: 'position', greeting: 'greeting' } as const;
type Attribute = keyof typeof ATTRIBUTES;

/** An attribute's value if it is valid, else undefined. Never throws: attributes are anyone's text. */
function accepted(name: Attribute, raw: string): string | undefined {
  const value = raw.trim();
  switch (name) {
    case 'title':
      // Control characters are dropped; the text is shown as text, never as markup.
      return value !== '' && [...value].length <= WIDGET_TITLE_MAX ? value.replace(/[\u0000-\u001f\u007f]/g, '') : undefined;
    case 'color':
    case 'text-color':
      return WIDGET_COLOR.test(value) ? value.toLowerCase() : undefined;
    case 'avatar':
      return safeAvatarUrl(value);
    case 'position':
      return (WIDGET_POSITIONS as readonly string[]).includes(value) ? value : undefined;
    case 'greeting':
      return (WIDGET_GREETINGS as readonly string[]).includes(value) ? value : undefined;
  }
}

/** Relative luminance of a #rgb/#rrggbb colour (WCAG 2). */
function luminance(color: string): number {
  const hex = color.length === 4 ? [...color.slice(1)].map((c) => c + c).join('') : color.slice(1);
  const channel = (i: number) => {
    const v = parseInt(hex.slice(i, i + 2), 16) / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(0) + 0.7152 * channel(2) + 0.0722 * channel(4);
}

const contrast = (a: number, b: number) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
const DARK_TEXT = '#1d2330';

/** White or near-black, whichever reads better on `background`. */
export function textOn(background: string): string {
  const bg = luminance(background);
  return contrast(bg, 1) >= contrast(bg, luminance(DARK_TEXT)) ? '#ffffff' : DARK_TEXT;
}

/**
 * The look of a widget: each valid attribute of the query, else the assistant's setting, else the
 * platform's default. `ignored` names the attributes that were given but not valid (the loader
 * warns about them in the page's console).
 */
export function widgetLook(stored: WidgetAppearance | null, query: Readonly<Record<string, QueryValue>>): { look: WidgetLook; ignored: string[] } {
  const chosen: WidgetAppearance = { ...(stored ?? {}) };
  const ignored: string[] = [];
  for (const [name, key] of Object.entries(ATTRIBUTES) as Array<[Attribute, (typeof ATTRIBUTES)[Attribute]]>) {
    const raw = query[name];
    if (raw === undefined) continue;
    const value = typeof raw === 'string' ? accepted(name, raw) : undefined;
    if (value === undefined) ignored.push(`data-${name}`);
    else (chosen as Record<string, string>)[key] = value;
  }
  const color = chosen.color ?? WIDGET_DEFAULTS.color;
  return {
    look: {
      title: chosen.title ?? WIDGET_DEFAULTS.title,
      color,
      text_color: chosen.text_color ?? textOn(color),
      avatar_url: chosen.avatar_url ? (safeAvatarUrl(chosen.avatar_url) ?? null) : null,
      position: chosen.position ?? WIDGET_DEFAULTS.position,
      greeting: chosen.greeting ?? WIDGET_DEFAULTS.greeting,
    },
    ignored,
  };
}
