import { transferableSymbol, valueSymbol } from 'piscina';
import { zipEntries } from './zip.js';
import { embedLocalMany } from './embed.js';
import { extractDocx, extractPdf, extractTxt, ExtractionError, htmlBlocks } from './extract.js';
import { chunkBlocks, type Block, type Chunk } from './text.js';

/**
 * CPU work of the platform, run in the piscina pool. Each export is a named task: a pure function
 * from bytes to a result. No database, no network. Buffers arrive transferred and go back the
 * same way, never copied.
 */

export type DocumentFileType = 'pdf' | 'txt' | 'docx';

export interface InspectUploadInput {
  readonly type: DocumentFileType;
  readonly bytes: Uint8Array;
}

export interface InspectUploadResult {
  /** Why the content is not the declared type; absent when it is. */
  readonly problem?: string;
  /** The input bytes, handed back. */
  readonly bytes: Uint8Array;
}

const PDF_MAGIC = Buffer.from('%PDF-');

function isPdf(bytes: Uint8Array): boolean {
  // Some writers put junk before the header; readers accept it within the first kilobyte.
  return Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, 1024)).indexOf(PDF_MAGIC) !== -1;
}

function isDocx(bytes: Uint8Array): boolean {
  const names = zipEntries(bytes)?.map((entry) => entry.name);
  return names !== undefined && names.includes('[Content_Types].xml') && names.includes('word/document.xml');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Text is UTF-8, UTF-16 with a byte-order mark, or single-byte text (Latin-1) without NUL bytes
 * and with few control characters. Anything else is binary.
 */
function isText(bytes: Uint8Array): boolean {
  if (bytes.length >= 2 && ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff))) return true;
  let control = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 0) return false;
    if (b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d && b !== 0x0c) control++;
  }
  if (control > bytes.length * 0.01) return false;
  try {
    utf8.decode(bytes);
    return true;
  } catch {
    return true; // Latin-1: every byte is a character; no NULs and few controls were found.
  }
}

export function inspectUpload({ type, bytes }: InspectUploadInput): InspectUploadResult {
  let problem: string | undefined;
  if (bytes.length === 0) problem = 'The file is empty.';
  else if (type === 'pdf' && !isPdf(bytes)) problem = 'The file must be a file of type: pdf.';
  else if (type === 'docx' && !isDocx(bytes)) problem = 'The file must be a file of type: docx.';
  else if (type === 'txt' && !isText(bytes)) problem = 'The file must be a file of type: txt.';
  return withTransfer({ problem, bytes }, [bytes.buffer as ArrayBuffer]);
}

/** Marks a result so piscina moves the listed buffers back instead of cloning them. */
function withTransfer<T extends object>(value: T, buffers: ArrayBuffer[]): T {
  return Object.defineProperties(value, {
    [transferableSymbol]: { value: buffers, enumerable: false },
    [valueSymbol]: { value, enumerable: false },
  });
}

export interface ExtractFileInput {
  readonly type: DocumentFileType;
  readonly bytes: Uint8Array;
}

/** Either blocks of text, or the reason (for the user) why there are none. */
export type ExtractResult = { readonly blocks: Block[] } | { readonly error: string };

async function guarded(work: () => Promise<Block[]> | Block[]): Promise<ExtractResult> {
  try {
    return { blocks: await work() };
  } catch (error) {
    if (error instanceof ExtractionError) return { error: error.message };
    throw error;
  }
}

export function extractFile({ type, bytes }: ExtractFileInput): Promise<ExtractResult> {
  if (type === 'pdf') return guarded(() => extractPdf(bytes));
  if (type === 'docx') return guarded(() => extractDocx(bytes));
  return guarded(() => extractTxt(bytes));
}

export interface ExtractHtmlInput {
  readonly html: string;
  readonly url: string;
}

export function extractHtml({ html, url }: ExtractHtmlInput) {
  return htmlBlocks(html, url);
}

export interface ChunkInput {
  readonly blocks: Block[];
  /** Also embed each chunk with the built-in local embedder. */
  readonly embed: boolean;
}

export interface ChunkOutput {
  readonly chunks: Chunk[];
  /** `chunks.length × dimensions` floats when `embed` was asked for. */
  readonly vectors?: Float32Array;
}

export function chunkAndEmbed({ blocks, embed }: ChunkInput): ChunkOutput {
  const chunks = chunkBlocks(blocks);
  if (!embed) return { chunks };
  const vectors = embedLocalMany(chunks.map((chunk) => chunk.content));
  return withTransfer({ chunks, vectors }, [vectors.buffer as ArrayBuffer]);
}

export function embedTexts({ texts }: { texts: string[] }): Float32Array {
  return embedLocalMany(texts);
}

export interface FormatVectorsInput {
  /** `count × dimensions` floats. */
  readonly vectors: Float32Array;
  readonly dimensions: number;
}

/** PostgreSQL array literals (`{0.012345,-0.5,...}`, six decimals) of many vectors. */
export function formatVectors({ vectors, dimensions }: FormatVectorsInput): string[] {
  const out: string[] = [];
  if (dimensions <= 0) return out;
  for (let start = 0; start < vectors.length; start += dimensions) {
    let literal = '{';
    for (let i = start; i < start + dimensions; i++) literal += (i === start ? '' : ',') + vectors[i]!.toFixed(6);
    out.push(`${literal}}`);
  }
  return out;
}
