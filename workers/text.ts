/**
 * Extracted text as blocks, and the chunker. Pure functions, used inside the worker pool.
 */

export interface Block {
  readonly kind: 'heading' | 'paragraph';
  readonly text: string;
  /** 1-based PDF page the block comes from. */
  readonly page?: number;
  /** Web page the block comes from. */
  readonly url?: string;
}

export interface Chunk {
  /** The heading in force, then the passage. */
  readonly content: string;
  /** Where the passage starts: `page 3` or a URL; null for plain files. */
  readonly source: string | null;
}

export interface ChunkOptions {
  /** Target passage length in characters (heading excluded). @defaultValue 800 */
  readonly size?: number;
  /** Characters repeated from the end of one chunk at the start of the next. @defaultValue 120 (15%) */
  readonly overlap?: number;
}

/**
 * Collapses runs of spaces and tabs, keeps line breaks meaningful, drops control characters
 * (U+0000, which PostgreSQL cannot store, among them: PDFs and misdeclared text files carry them),
 * trims.
 */
export function normalizeText(text: string): string {
  return text
    .replace(/[\u0000-\u0008\u000e-\u001f\u007f]/g, '')
    .replace(/\r\n?/g, '\n')
    .replace(/[\t\f\v \u00a0]+/g, ' ')
    .replace(/ *\n */g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

function sourceOf(block: Block): string | null {
  if (block.url) return block.url;
  if (block.page !== undefined) return `page ${block.page}`;
  return null;
}

/** The last `overlap` characters of `text`, starting at a word boundary. */
function tail(text: string, overlap: number): string {
  if (text.length <= overlap) return text;
  const cut = text.slice(text.length - overlap);
  const space = cut.search(/\s/);
  return space === -1 ? '' : cut.slice(space + 1);
}

/** Longest heading put at the start of the chunks under it. */
const MAX_HEADING = 200;

/**
 * Splits blocks into overlapping chunks of about `size` characters, never inside a word. Each chunk
 * starts with the heading in force when it was cut (unless it already does), so a passage keeps
 * its context; a new heading, a new PDF page or a new web page starts a new chunk.
 */
export function chunkBlocks(blocks: readonly Block[], options: ChunkOptions = {}): Chunk[] {
  const size = options.size ?? 800;
  const overlap = options.overlap ?? Math.round(size * 0.15);
  const chunks: Chunk[] = [];
  let heading = '';
  let buffer = '';
  let bufferSource: string | null = null;
  let url: string | undefined;
  let page: number | undefined;

  const emit = (): void => {
    const passage = buffer.trim();
    if (passage === '') return;
    const content = heading && !passage.startsWith(heading) ? `${heading}\n${passage}` : passage;
    chunks.push({ content, source: bufferSource });
  };
  const restart = (): void => {
    buffer = '';
    bufferSource = null;
  };

  for (const block of blocks) {
    let text = normalizeText(block.text);
    if (text === '') continue;
    if (block.url !== url) {
      emit();
      restart();
      heading = '';
      url = block.url;
    } else if (block.page !== page) {
      // A new PDF page starts a new chunk (the heading carries on), so a passage's page is exact.
      emit();
      restart();
    }
    page = block.page;
    if (block.kind === 'heading') {
      emit();
      restart();
      const flat = text.replace(/\s+/g, ' ');
      if (flat.length <= MAX_HEADING) {
        heading = flat;
        continue;
      }
      // A "heading" of a paragraph's length (a line marked `#`, a long <h1>) would be repeated whole
      // in every chunk under it: its first words head them, and all of it is text.
      const space = flat.lastIndexOf(' ', MAX_HEADING);
      const high = flat.charCodeAt(MAX_HEADING - 1);
      heading = flat.slice(0, space > MAX_HEADING / 2 ? space : high >= 0xd800 && high <= 0xdbff ? MAX_HEADING - 1 : MAX_HEADING);
      // Its lines as one, as the heading has them: the first chunk then starts with the heading rather than repeating it.
      text = flat;
    }
    bufferSource ??= sourceOf(block);
    for (const word of text.split(/(?<=\s)|(?=\s)/)) {
      if (buffer.length + word.length > size && buffer.trim() !== '') {
        emit();
        buffer = tail(buffer.trimEnd(), overlap);
        bufferSource = sourceOf(block);
        // The overlap ends at a word: one space before what follows (the white space that ended the chunk, or the next word).
        if (buffer !== '') buffer += ' ';
        if (word.trim() === '') continue;
      }
      if (word.length > size) {
        // A "word" longer than a chunk (a URL, a hash) is cut hard; there is no boundary to keep.
        for (let i = 0; i < word.length; i += size) {
          buffer += word.slice(i, i + size);
          if (buffer.length >= size) {
            emit();
            buffer = '';
          }
        }
        continue;
      }
      buffer += word;
    }
    buffer += '\n';
  }
  emit();
  return chunks;
}
