import type { FunctionDefinition } from './types.js';

/**
 * The dev model's reading and writing, deterministic and without a network: plain-text answers
 * from knowledge passages and function results, small talk, and function arguments picked from a
 * message by the names, types and descriptions of their schema.
 */

/** The longest knowledge answer, in characters: two or three spoken sentences. */
export const ANSWER_CHARS = 320;

const STOP_WORDS = new Set(
  'a an and are at be can do does for from have how i in is it me my of on or our the to we what when where which who why will with you your'.split(' '),
);

/** Text as a listener would read it: no markup, no escapes, single spaces. */
export function plainText(text: string): string {
  return text
    .replace(/\\[nrt]/g, ' ')
    .replace(/[*_`#>|]+/g, ' ')
    .replace(/\[(.*?)\]\((.*?)\)/g, '$1')
    .replace(/\s+/g, ' ')
    .trim();
}

/** Sentences of plain text, each with its end punctuation. */
export function sentences(text: string): string[] {
  return (plainText(text).match(/[^.!?]+(?:[.!?]+(?=\s|$)|$)/g) ?? []).map((s) => s.trim()).filter(Boolean);
}

function contentWords(text: string): Set<string> {
  const words = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  return new Set(words.filter((w) => !STOP_WORDS.has(w)).map((w) => (w.length > 3 ? w.replace(/(?:es|s)$/, '') : w)));
}

/** Cuts `text` at the last word boundary within `limit` characters, ending it with an ellipsis. */
function cutAtWord(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const cut = text.slice(0, limit - 1);
  return `${cut.slice(0, Math.max(cut.lastIndexOf(' '), 1)).replace(/[,;:]$/, '')}…`;
}

/**
 * The sentences of a passage that answer `question`: the one sharing the most words with it
 * (the first on a tie), and the whole sentences after it while they fit in `limit` characters.
 * A single sentence longer than the limit is cut at a word; one without end punctuation gets a
 * full stop.
 */
export function answerFrom(passage: string, question: string, limit = ANSWER_CHARS): string {
  const all = sentences(passage);
  if (all.length === 0) return '';
  const asked = contentWords(question);
  let best = 0;
  let bestScore = -1;
  all.forEach((sentence, i) => {
    let score = 0;
    for (const word of contentWords(sentence)) if (asked.has(word)) score++;
    if (score > bestScore) [best, bestScore] = [i, score];
  });
  let answer = all[best]!;
  // Only whole sentences follow: a heading or a table row has no end punctuation.
  for (const next of all.slice(best + 1)) {
    if (answer.length + 1 + next.length > limit || !/[.!?]$/.test(next)) break;
    answer = `${answer} ${next}`;
  }
  answer = cutAtWord(answer, limit);
  return /[.!?…]$/.test(answer) ? answer : `${answer}.`;
}

export type SmallTalk = 'greeting' | 'thanks' | 'goodbye';

const SMALL_TALK_WORDS = new Set(
  'hi hello hey hiya there good morning afternoon evening day thanks thank you thx ty much very so a lot again for the help bye goodbye see later cheers ok okay great cool perfect awesome nice all that s it that\'s is everything'.split(' '),
);

/** A message that is only a greeting, thanks or goodbye (and not a question that starts with one); goodbye over thanks over greeting. */
export function smallTalk(message: string): SmallTalk | undefined {
  const words = message.toLowerCase().match(/[\p{L}']+/gu) ?? [];
  if (words.length === 0 || words.length > 8 || /\?/.test(message) || !words.every((w) => SMALL_TALK_WORDS.has(w))) return undefined;
  const text = words.join(' ');
  if (/\b(bye|goodbye|see you|later)\b/.test(text)) return 'goodbye';
  if (/\b(thanks|thank|thx|ty|cheers)\b/.test(text)) return 'thanks';
  if (/\b(hi|hello|hey|hiya|good (morning|afternoon|evening|day))\b/.test(text)) return 'greeting';
  return undefined;
}

export const SMALL_TALK_REPLIES: Readonly<Record<SmallTalk, string>> = {
  greeting: 'Hello! How can I help you today?',
  thanks: "You're welcome! Is there anything else I can help you with?",
  goodbye: 'Goodbye, and have a nice day!',
};

interface PropertySchema {
  readonly type?: string;
  readonly description?: string;
  readonly enum?: readonly unknown[];
}

/**
 * Patterns of a property's value by what its name and description say; the first of `value` that
 * matches wins. `keys`: the value is every keypad key the message names, digits or words ("one",
 * "hash"), joined.
 */
const PATTERNS: ReadonlyArray<{ readonly key: RegExp; readonly value: RegExp | readonly RegExp[]; readonly keys?: true }> = [
  { key: /\be-?mail/, value: /[\w.+-]+@[\w-]+(?:\.[\w-]+)+/ },
  { key: /\b(?:url|link|website|site)\b/, value: /https?:\/\/[^\s,]+[^\s,.!?]/ },
  { key: /\b(?:date|day)\b/, value: /\b\d{4}-\d{2}-\d{2}(?:T[\d:.]+Z?)?\b|\b(?:today|tomorrow|yesterday|(?:mon|tues|wednes|thurs|fri|satur|sun)day)\b/i },
  { key: /\b(?:zone|timezone|tz)\b/, value: /\b(?:[A-Z][a-z]+\/[A-Z][\w-]+(?:\/[A-Z][\w-]+)?|UTC)\b/ },
  { key: /\b(?:time|start|when)\b/, value: /\b\d{4}-\d{2}-\d{2}T[\d:.]+Z?\b|\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b|\b\d{1,2}:\d{2}\b/i },
  { key: /\b(?:phone|mobile|tel|telephone|fax)\b/, value: [/\+\d[\d\s().-]{6,}\d/, /\(?\b\d{3}\)?[\s.-]?\d{3}[\s.-]?\d{4}\b/] },
  { key: /\b(?:digits|keys|pin)\b/, value: /[\d*#]/g, keys: true },
  { key: /\b(?:order|id|code|reference|ref|ticket|booking|invoice|account|sku|number)\b/, value: [/(?<=\b(?:order|number|no\.?|id|code|reference|ref|ticket|booking|invoice|account)\s+#?)[A-Z0-9][A-Z0-9-]*\b/i, /#\d+|\b(?=[A-Z-]*\d)(?=[0-9-]*[A-Z])[A-Z0-9][A-Z0-9-]*[A-Z0-9]\b/i, /\b\d+\b/] },
  { key: /\b(?:zip|postal|postcode)\b/, value: /\b\d{4,5}(?:-\d{4})?\b|\b[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}\b/i },
];

/** A person's name: after "my name is", "I am", "this is", "for" or "call me", or a run of capitalised words within the message. */
function nameIn(message: string): string | undefined {
  const introduced = /\b(?:name is|i am|i'm|this is|call me|for|named)\s+((?:[A-Z][\p{L}'-]+\s?){1,3})/u.exec(message)?.[1];
  if (introduced) return introduced.trim();
  const words = message.split(/\s+/).slice(1).join(' ');
  return /((?:[A-Z][\p{L}'-]+\s?){1,3})/u.exec(words)?.[1]?.trim().replace(/[.,!?]$/, '');
}

/** A place: a capitalised word or two after "in", "to", "from", "at" or "near". */
function placeIn(message: string): string | undefined {
  return /\b(?:in|to|from|at|near)\s+((?:[A-Z][\p{L}'-]+\s?){1,2})/u.exec(message)?.[1]?.trim();
}

/**
 * Arguments of `fn` picked from `message` by each property's name, type and description: numbers
 * in order for numeric ones, yes/no for booleans, an enum value the message names, and for
 * strings an email, URL, date, time zone, time, phone number, keys, reference, postal code, name or
 * place by simple patterns keyed on the property. A property keyed so that the message has no such
 * value is left out; one no pattern is keyed on (a query, a message) gets the whole message.
 */
export function argumentsFor(fn: FunctionDefinition, message: string): Record<string, unknown> {
  const properties = (fn.parameters.properties ?? {}) as Record<string, PropertySchema>;
  // Numbers standing alone: not parts of dates, times, emails, phone numbers or references.
  const loose = message.replace(/\S*@\S*|\d{4}-\d{2}-\d{2}\S*|\d{1,2}:\d{2}|\+\d[\d\s().-]{6,}\d|\b(?=\S*\d)(?=\S*[A-Za-z])\S+/g, ' ');
  const numbers = (loose.match(/-?\d+(?:\.\d+)?/g) ?? []).map(Number);
  const args: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(properties)) {
    const key = `${name} ${schema.description ?? ''}`.toLowerCase().replace(/_/g, ' ');
    if (schema.enum) {
      const named = schema.enum.find((value) => message.toLowerCase().includes(String(value).toLowerCase()));
      if (named !== undefined) args[name] = named;
      continue;
    }
    if (schema.type === 'number' || schema.type === 'integer') {
      const named = numberNamed(name, loose);
      if (named !== undefined) numbers.splice(numbers.indexOf(named), 1);
      args[name] = named ?? numbers.shift() ?? 0;
      continue;
    }
    if (schema.type === 'boolean') {
      args[name] = !/\b(no|not|don't|false|never)\b/i.test(message);
      continue;
    }
    const value = stringArgument(key, message);
    if (value !== undefined) args[name] = value;
  }
  return args;
}

/** A number said next to a word of the property's name ("4 guests", "quantity: 3"). */
function numberNamed(name: string, text: string): number | undefined {
  for (const word of name.toLowerCase().split(/[_\s]+/).filter((w) => w.length > 2)) {
    const stem = word.replace(/s$/, '');
    const found = new RegExp(`(-?\\d+(?:\\.\\d+)?)\\s+${stem}|\\b${stem}s?\\s*(?:of|:|=|is)?\\s*(-?\\d+(?:\\.\\d+)?)`, 'i').exec(text);
    if (found) return Number(found[1] ?? found[2]);
  }
  return undefined;
}

const KEY_WORDS: Readonly<Record<string, string>> = { zero: '0', one: '1', two: '2', three: '3', four: '4', five: '5', six: '6', seven: '7', eight: '8', nine: '9', star: '*', hash: '#', pound: '#' };

/** A string argument; undefined when the property asks for something (an email, a date) the message does not have. */
function stringArgument(key: string, message: string): string | undefined {
  let keyed = false;
  for (const pattern of PATTERNS) {
    if (!pattern.key.test(key)) continue;
    keyed = true;
    const found = pattern.keys
      ? message.replace(/[a-z]+/gi, (word) => KEY_WORDS[word.toLowerCase()] ?? '').match(pattern.value as RegExp)?.join('')
      : [pattern.value].flat().map((value) => value.exec(message)?.[0]?.trim()).find(Boolean);
    if (found) return found;
  }
  if (/\bname\b/.test(key)) return nameIn(message);
  if (/\b(?:city|location|address|place|destination|country)\b/.test(key)) return placeIn(message);
  return keyed ? undefined : message;
}

/** What a function's result says, as one or two spoken sentences. */
export function resultText(result: unknown, question: string): string {
  if (result === null || typeof result !== 'object') return plainText(String(result ?? ''));
  const record = result as Record<string, unknown>;
  if (Array.isArray(record.passages)) {
    const best = record.passages.find((p): p is { content: string } => typeof (p as { content?: unknown })?.content === 'string');
    return best ? answerFrom(best.content, question) : 'I could not find anything about that in our documents.';
  }
  if (typeof record.error === 'string') return `Sorry, that did not work: ${cutAtWord(plainText(record.error), ANSWER_CHARS)}`;
  if (typeof record.instruction === 'string') {
    if (/goodbye/i.test(record.instruction)) return 'Thank you for calling. Goodbye.';
    if (/transfer/i.test(record.instruction)) return 'I am transferring you now.';
  }
  if (typeof record.text === 'string') return answerFrom(record.text, question) || 'Done.';
  const facts = Object.entries(record)
    .filter(([key, value]) => key !== 'ok' && key !== 'instruction' && value !== null && value !== undefined)
    .slice(0, 4)
    .map(([key, value]) => `${key.replace(/_/g, ' ')}: ${spoken(value)}`);
  return facts.length === 0 ? 'Done.' : `${cutAtWord(facts.join('; '), ANSWER_CHARS)}.`;
}

function spoken(value: unknown): string {
  if (Array.isArray(value)) return value.slice(0, 5).map(spoken).join(', ');
  if (value !== null && typeof value === 'object') return Object.values(value).filter((v) => v !== null && typeof v !== 'object').slice(0, 3).map(String).join(' ');
  return plainText(String(value));
}
