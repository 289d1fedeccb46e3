import { readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';

/**
 * An uploaded document file's bytes live in PostgreSQL (`document_uploads`) from the transaction
 * that creates the document until its ingestion ends, so whichever process claims the job reads
 * them. Files under `DATA_DIR/uploads/` (the document's `source.path`) are those of earlier
 * versions: a job whose bytes are not in the database reads its file from there, and the file goes
 * with its document.
 */

/** Run in the transaction that inserts the document. The bytes are sent as they are, not copied. */
export async function storeUpload(db: CommonQueryMethods, documentId: number, bytes: Uint8Array): Promise<void> {
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  await db.query(sql.unsafe`INSERT INTO document_uploads (document_id, bytes) VALUES (${documentId}, ${sql.binary(data)})`);
}

/** The file of a document whose ingestion has not ended; null when the database holds none. */
export async function uploadedBytes(db: CommonQueryMethods, documentId: number): Promise<Buffer | null> {
  return db.maybeOneFirst(sql.type(z.object({ bytes: z.instanceof(Buffer) }))`SELECT bytes FROM document_uploads WHERE document_id = ${documentId}`);
}

/** Run in the transaction that ends the document's ingestion: nothing will read the file again. */
export async function dropUpload(db: CommonQueryMethods, documentId: number): Promise<void> {
  await db.query(sql.unsafe`DELETE FROM document_uploads WHERE document_id = ${documentId}`);
}

/** A file an earlier version stored under DATA_DIR; null when this machine does not have it. */
export async function readLegacyUpload(dataDir: string, relative: string): Promise<Buffer | null> {
  return readFile(join(dataDir, relative)).catch(() => null);
}

export async function removeLegacyUpload(dataDir: string, relative: string): Promise<void> {
  await unlink(join(dataDir, relative)).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}
