/** Reads a zip's central directory (names and declared sizes) without inflating anything. */

export interface ZipEntry {
  readonly name: string;
  readonly compressedSize: number;
  readonly uncompressedSize: number;
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
      compressedSize: view.readUInt32LE(offset + 20),
      uncompressedSize: view.readUInt32LE(offset + 24),
    });
    offset += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}
