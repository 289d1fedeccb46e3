import { randomUUID } from 'node:crypto';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Uploaded document files under `DATA_DIR/uploads/<user id>/`. A file is written to a temporary
 * name, flushed to disk and renamed, so a stored path always names a complete file.
 * @returns the path relative to DATA_DIR.
 */
export async function storeUpload(dataDir: string, userId: number, extension: string, bytes: Uint8Array): Promise<string> {
  const relative = join('uploads', String(userId), `${randomUUID()}.${extension}`);
  const target = join(dataDir, relative);
  await mkdir(join(dataDir, 'uploads', String(userId)), { recursive: true });
  const temporary = `${target}.partial`;
  const handle = await open(temporary, 'w', 0o600);
  try {
    try {
      await handle.writeFile(bytes);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temporary, target);
  } catch (error) {
    // A full disk or a failed flush leaves no half-written file behind.
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
  return relative;
}

export async function removeUpload(dataDir: string, relative: string): Promise<void> {
  await unlink(join(dataDir, relative)).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}
