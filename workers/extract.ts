import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { load } from 'cheerio/slim';
import type { AnyNode, Element } from 'domhandler';
import mammoth from 'mammoth';
import { getDocument } from 'pdfjs-dist/legacy/build/pdf.mjs';
import { normalizeText, type Block } from './text.js';
import { entriesKeepTheirSizes, zipEntries } from './zip.js';

/**
 * Text extraction from uploaded files and web pages. Every failure a user can cause (a corrupt,
 * encrypted, empty or oversized file) is an ExtractionError with a message meant for them.
 */

export class ExtractionError extends Error {
  override readonly name = 'ExtractionError';
}

const require = createRequire(import.meta.url);
const STANDARD_FONTS = join(dirname(require.resolve('pdfjs-dist/package.json')), 'standard_fonts') + '/';

/** Largest total a DOCX may expand to, checked on its declared sizes before anything is inflated. */
const DOCX_MAX_EXPANDED = 100 * 1024 * 1024;
const DOCX_MAX_RATIO = 200;

export async function extractPdf(bytes: Uint8Array): Promise<Block[]> {
  let doc;
  try {
    doc = await getDocument({
      data: bytes,
      standardFontDataUrl: STANDARD_FONTS,
      disableFontFace: true,
      isEvalSupported: false,
      useSystemFonts: false,
      verbosity: 0,
    }).promise;
  } catch (error) {
    const name = (error as Error).name;
    if (name === 'PasswordException') throw new ExtractionError('The PDF is password-protected; upload it without a password.');
    throw new ExtractionError('The PDF file is corrupt or unreadable.');
  }
  const blocks: Block[] = [];
  try {
    for (let number = 1; number <= doc.numPages; number++) {
      const page = await doc.getPage(number);
      const content = await page.getTextContent();
      let text = '';
      for (const item of content.items) {
        if (!('str' in item)) continue;
        text += item.str;
        if (item.hasEOL) text += '\n';
      }
      page.cleanup();
      for (const paragraph of text.split(/\n\s*\n/)) {
        if (paragraph.trim() !== '') blocks.push({ kind: 'paragraph', text: paragraph, page: number });
      }
    }
  } catch {
    throw new ExtractionError('The PDF file is corrupt or unreadable.');
  } finally {
    await doc.destroy();
  }
  if (blocks.length === 0) throw new ExtractionError('The PDF contains no extractable text (it may be a scanned image).');
  return blocks;
}

export async function extractDocx(bytes: Uint8Array): Promise<Block[]> {
  const entries = zipEntries(bytes);
  if (!entries || !entries.some((e) => e.name === 'word/document.xml')) throw new ExtractionError('The DOCX file is corrupt or unreadable.');
  const expanded = entries.reduce((sum, e) => sum + e.uncompressedSize, 0);
  const packed = entries.reduce((sum, e) => sum + e.compressedSize, 0);
  if (expanded > DOCX_MAX_EXPANDED || expanded > Math.max(packed, 1) * DOCX_MAX_RATIO || !entriesKeepTheirSizes(bytes, entries)) {
    throw new ExtractionError('The DOCX file expands to an unreasonable size and was refused.');
  }
  let html: string;
  try {
    html = (await mammoth.convertToHtml({ buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) })).value;
  } catch {
    throw new ExtractionError('The DOCX file is corrupt or unreadable.');
  }
  const blocks = htmlBlocks(html).blocks;
  if (blocks.length === 0) throw new ExtractionError('The DOCX file contains no text.');
  return blocks;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** UTF-8 (with or without BOM), UTF-16 with a BOM, else Windows-1252 (a superset of Latin-1). */
export function decodeText(bytes: Uint8Array): string {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return new TextDecoder('utf-8').decode(bytes.subarray(3));
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return new TextDecoder('utf-16le').decode(bytes.subarray(2));
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return new TextDecoder('utf-16be').decode(bytes.subarray(2));
  try {
    return utf8.decode(bytes);
  } catch {
    return new TextDecoder('windows-1252').decode(bytes);
  }
}

/** Paragraphs split on blank lines; Markdown `#` lines become headings. */
export function extractTxt(bytes: Uint8Array): Block[] {
  const blocks: Block[] = [];
  for (const paragraph of decodeText(bytes).split(/\r?\n\s*\r?\n/)) {
    const lines = paragraph.split(/\r?\n/);
    let rest: string[] = [];
    for (const line of lines) {
      const heading = /^#{1,6}\s+(.+)$/.exec(line.trim());
      if (heading) {
        if (rest.length > 0) blocks.push({ kind: 'paragraph', text: rest.join('\n') });
        rest = [];
        blocks.push({ kind: 'heading', text: heading[1]! });
      } else rest.push(line);
    }
    if (rest.join('').trim() !== '') blocks.push({ kind: 'paragraph', text: rest.join('\n') });
  }
  if (blocks.length === 0) throw new ExtractionError('The text file is empty.');
  return blocks;
}

/** Distinct links of a page handed back to the crawler. */
const MAX_PAGE_LINKS = 1_000;
const SKIP = new Set(['script', 'style', 'nav', 'footer', 'noscript', 'svg', 'template', 'iframe', 'head', 'form', 'button', 'select']);
const BLOCK = new Set([
  'p', 'div', 'section', 'article', 'main', 'aside', 'header', 'ul', 'ol', 'dl', 'table', 'thead', 'tbody', 'tfoot',
  'blockquote', 'pre', 'figure', 'figcaption', 'caption', 'address', 'details', 'summary', 'dt', 'dd', 'hr', 'body', 'html',
]);

export interface HtmlResult {
  readonly title: string;
  readonly blocks: Block[];
  /** Absolute http(s) links without fragments, in document order. */
  readonly links: string[];
}

/**
 * Readable text of an HTML page: scripts, styles, navigation and footers dropped; headings kept as
 * headings; list items as "- item"; table rows as "cell | cell".
 */
export function htmlBlocks(html: string, pageUrl?: string): HtmlResult {
  const $ = load(html);
  const blocks: Block[] = [];
  let buffer = '';
  const flush = (): void => {
    const text = normalizeText(buffer);
    if (text !== '') blocks.push({ kind: 'paragraph', text, ...(pageUrl ? { url: pageUrl } : {}) });
    buffer = '';
  };
  const inlineText = (node: AnyNode): string => {
    if (node.type === 'text') return (node as unknown as { data: string }).data;
    if (node.type !== 'tag' && node.type !== 'script' && node.type !== 'style') return '';
    const element = node as Element;
    if (SKIP.has(element.name)) return '';
    if (element.name === 'br') return '\n';
    return element.children.map(inlineText).join('');
  };
  const walk = (node: AnyNode): void => {
    if (node.type === 'text') {
      buffer += (node as unknown as { data: string }).data;
      return;
    }
    if (node.type !== 'tag' && node.type !== 'root') return;
    const element = node as Element;
    const name = node.type === 'root' ? 'body' : element.name;
    if (SKIP.has(name)) return;
    if (/^h[1-6]$/.test(name)) {
      flush();
      const text = normalizeText(inlineText(element)).replace(/\s+/g, ' ');
      if (text) blocks.push({ kind: 'heading', text, ...(pageUrl ? { url: pageUrl } : {}) });
      return;
    }
    if (name === 'li') {
      flush();
      buffer = '- ';
      element.children.forEach(walk);
      flush();
      return;
    }
    if (name === 'tr') {
      flush();
      const cells = element.children.filter((c): c is Element => c.type === 'tag' && (c.name === 'td' || c.name === 'th'));
      buffer = cells.map((cell) => normalizeText(inlineText(cell)).replace(/\s+/g, ' ')).join(' | ');
      flush();
      return;
    }
    if (name === 'br') {
      buffer += '\n';
      return;
    }
    const isBlock = BLOCK.has(name);
    if (isBlock) flush();
    ((node as Element).children ?? []).forEach(walk);
    if (isBlock) flush();
  };
  walk($.root()[0] as AnyNode);
  flush();

  const links: string[] = [];
  if (pageUrl) {
    // The crawler follows at most 50 (and looks at 200 new ones per page): a page of 100,000 links need not send them all back.
    const seen = new Set<string>();
    $('a[href]').each((_, a) => {
      if (links.length >= MAX_PAGE_LINKS) return false;
      try {
        const link = new URL($(a).attr('href') ?? '', pageUrl);
        if (link.protocol !== 'http:' && link.protocol !== 'https:') return;
        link.hash = '';
        if (!seen.has(link.href)) {
          seen.add(link.href);
          links.push(link.href);
        }
      } catch {
        // An href that is not a URL is not a link to follow.
      }
    });
  }
  return { title: normalizeText($('title').first().text()), blocks, links };
}
