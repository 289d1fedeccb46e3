import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/**
 * The channels' secrets (WhatsApp access tokens, app secrets, verify tokens) are sealed at rest
 * with AES-256-GCM under a key kept outside the database: CHANNEL_SECRETS_KEY, or a key file made
 * once in the data directory. A database copy alone reveals none of them.
 *
 * Sealed form: version byte 1, the key's 4-byte fingerprint, 12-byte nonce, 16-byte tag, ciphertext.
 */

export const KEY_FILE = 'channel-secrets.key';
const VERSION = 1;

/** A sealed value that this key cannot open: sealed under another key, or altered. */
export class SealedUnreadable extends Error {
  override readonly name = 'SealedUnreadable';
}

export interface Sealer {
  seal(value: unknown): Buffer;
  /** A keyed digest (HMAC-SHA256) of a secret looked up by value, as a verify token is. */
  digest(text: string): Buffer;
  /** @throws SealedUnreadable when the value was sealed under another key or was altered. */
  open<T>(sealed: Buffer): T;
}

const fingerprintOf = (key: Buffer) => createHash('sha256').update(key).digest().subarray(0, 4);

export function createSealer(key: Buffer): Sealer {
  if (key.length !== 32) throw new Error('the channel secrets key must be 32 bytes');
  const fingerprint = fingerprintOf(key);
  return {
    digest: (text) => createHmac('sha256', key).update(text).digest(),
    seal(value) {
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      const body = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
      return Buffer.concat([Buffer.of(VERSION), fingerprint, nonce, cipher.getAuthTag(), body]);
    },
    open<T>(sealed: Buffer): T {
      if (sealed.length < 33 || sealed[0] !== VERSION) throw new SealedUnreadable('the channel secret is not in a known sealed form');
      if (!sealed.subarray(1, 5).equals(fingerprint)) throw new SealedUnreadable('the channel secret was sealed under another key (CHANNEL_SECRETS_KEY or DATA_DIR/channel-secrets.key changed)');
      const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(5, 17));
      decipher.setAuthTag(sealed.subarray(17, 33));
      try {
        return JSON.parse(Buffer.concat([decipher.update(sealed.subarray(33)), decipher.final()]).toString('utf8')) as T;
      } catch (error) {
        throw new SealedUnreadable('the channel secret was altered', { cause: error });
      }
    },
  };
}

/**
 * The configured key, else the data directory's key file, made (mode 0600) when there is none.
 * Processes starting together on one data directory agree: the key is written whole to a file of
 * the process's own, then linked into place (which fails if another got there first), and a loser reads the winner's.
 */
export async function channelSecretsKey(configured: Buffer | undefined, dataDir: string): Promise<Buffer> {
  if (configured) return configured;
  const path = join(dataDir, KEY_FILE);
  const read = async () => {
    const key = Buffer.from((await readFile(path, 'utf8')).trim(), 'hex');
    if (key.length !== 32) throw new Error(`${path} does not hold a 32-byte key (64 hex digits)`);
    return key;
  };
  try {
    return await read();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  await mkdir(dirname(path), { recursive: true });
  const own = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(own, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  try {
    await link(own, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await unlink(own);
  }
  return read();
}
