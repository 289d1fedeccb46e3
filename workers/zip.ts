import { inflateRawSync } from 'node:zlib';

/**
 * Reads a zip's central directory (names and declared sizes) without inflating anything, and
 * checks that entries inflate to no more than they declare.
 */

export interface ZipEntry {
  readonly name: string;
  /** 0 stored, 8 deflated. */
  readonly method: number;
  readonly compressedSize: number;
  readonly uncompressedSize: number;
  readonly localHeaderOffset: number;
}

/** The entries of a zip, or undefined when the bytes are not a readable zip. */
export function zipEntries(bytes: Uint8Array): ZipEntry[] | undefined {
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
  const entries: ZipEntry[] = [];
  for (let i = 0; i < count; i++) {
    if (offset + 46 > view.length || view.readUInt32LE(offset) !== 0x02014b50) return undefined;
    const nameLength = view.readUInt16LE(offset + 28);
    const extraLength = view.readUInt16LE(offset + 30);
    const commentLength = view.readUInt16LE(offset + 32);
    entries.push({
      name: view.toString('utf8', offset + 46, offset + 46 + nameLength),
      method: view.readUInt16LE(offset + 10),
      compressedSize: view.readUInt32LE(offset + 20),
      uncompressedSize: view.readUInt32LE(offset + 24),
      localHeaderOffset: view.readUInt32LE(offset + 42),
    });
    offset += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

/**
 * Whether every entry inflates to at most the size it declares: a zip that understates them (a
 * decompression bomb made to pass a check of the declared sizes) is found here, with inflation
 * stopped at the declared size, before any library inflates it without limit.
 */
export function entriesKeepTheirSizes(bytes: Uint8Array, entries: readonly ZipEntry[]): boolean {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (const entry of entries) {
    if (entry.method === 0) {
      if (entry.compressedSize !== entry.uncompressedSize) return false;
      continue;
    }
    if (entry.method !== 8) return false;
    const at = entry.localHeaderOffset;
    if (at + 30 > view.length || view.readUInt32LE(at) !== 0x04034b50) return false;
    const start = at + 30 + view.readUInt16LE(at + 26) + view.readUInt16LE(at + 28);
    if (start + entry.compressedSize > view.length) return false;
    try {
      const inflated = inflateRawSync(view.subarray(start, start + entry.compressedSize), { maxOutputLength: Math.max(1, entry.uncompressedSize) });
      if (inflated.length !== entry.uncompressedSize) return false;
    } catch {
      return false;
    }
  }
  return true;
}
