import { transferableSymbol, valueSymbol } from 'piscina';

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

/** Names of the entries in a zip's central directory, or undefined when there is none. */
export function zipEntryNames(bytes: Uint8Array): string[] | undefined {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.length < 22 || view.readUInt32LE(0) !== 0x04034b50) return undefined;
  // The end-of-central-directory record sits in the last 64 KiB + 22 bytes.
  const floor = Math.max(0, view.length - 65_557);
  let eocd = -1;
  for (let i = view.length - 22; i >= floor; i--) {
    if (view.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd === -1) return undefined;
  const count = view.readUInt16LE(eocd + 10);
  let offset = view.readUInt32LE(eocd + 16);
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    if (offset + 46 > view.length || view.readUInt32LE(offset) !== 0x02014b50) return undefined;
    const nameLength = view.readUInt16LE(offset + 28);
    const extraLength = view.readUInt16LE(offset + 30);
    const commentLength = view.readUInt16LE(offset + 32);
    names.push(view.toString('utf8', offset + 46, offset + 46 + nameLength));
    offset += 46 + nameLength + extraLength + commentLength;
  }
  return names;
}

function isDocx(bytes: Uint8Array): boolean {
  const names = zipEntryNames(bytes);
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
