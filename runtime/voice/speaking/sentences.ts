/**
 * Streamed text cut into sentences, each spoken as soon as it is complete: the first words of an
 * answer reach the caller while the model is still writing the rest.
 */

/** A sentence shorter than this is spoken together with the next one ("Hi. I can help with that."). */
const MIN_SENTENCE = 12;
/** Text running this long without a sentence end is cut at a word (or, without spaces, here) so speaking can start. */
const MAX_SENTENCE = 200;
/**
 * The end of a sentence: Latin-script ends (and the Devanagari danda and Arabic question mark) need
 * the white space after them ("3.5" is not an end), the full-width ends of Chinese and Japanese do not; a line break always ends one.
 */
const SENTENCE_END = /[.!?…।؟]+["'”’)\]]*\s+|[。！？]+["'”’」』)\]]*\s*|\n+/g;
/** Where text without a sentence end is cut, best first: after white space, else after a clause mark that is not inside a number ("3,5", "10:30"). */
const SOFT_BREAKS: ReadonlyArray<(before: string, mark: string, after: string) => boolean> = [
  (_before, mark) => /\s/.test(mark),
  (before, mark, after) => /[,;:，、；：]/.test(mark) && !(/\d/.test(before) && /\d/.test(after)),
];

/** Cuts streamed text into sentences to speak as soon as each one is complete. */
export class SentenceChunker {
  private buffer = '';
  push(delta: string): string[] {
    this.buffer += delta;
    const out: string[] = [];
    for (let end = this.cut(); end !== undefined; end = this.cut()) {
      const sentence = this.buffer.slice(0, end).trim();
      this.buffer = this.buffer.slice(end);
      if (sentence) out.push(sentence);
    }
    return out;
  }
  flush(): string[] {
    const rest = this.buffer.trim();
    this.buffer = '';
    return rest ? [rest] : [];
  }

  /** Where the next piece to speak ends (always past the start, so every cut consumes text), or undefined to wait for more. */
  private cut(): number | undefined {
    // Only the first MAX_SENTENCE characters can hold the end: a provider's one large delta is not scanned whole each time.
    const window = this.buffer.slice(0, MAX_SENTENCE + 1);
    SENTENCE_END.lastIndex = 0;
    for (let match = SENTENCE_END.exec(window); match; match = SENTENCE_END.exec(window)) {
      const end = match.index + match[0].length;
      if (end > MAX_SENTENCE) break;
      if (end >= MIN_SENTENCE) return end;
    }
    if (this.buffer.length <= MAX_SENTENCE) return undefined;
    for (const soft of SOFT_BREAKS) {
      for (let at = MAX_SENTENCE; at > MIN_SENTENCE; at--) if (soft(this.buffer[at - 2] ?? '', this.buffer[at - 1]!, this.buffer[at] ?? '')) return at;
    }
    // Never between the two halves of a character outside the BMP (an emoji).
    const high = this.buffer.charCodeAt(MAX_SENTENCE - 1);
    return high >= 0xd800 && high <= 0xdbff ? MAX_SENTENCE - 1 : MAX_SENTENCE;
  }
}
