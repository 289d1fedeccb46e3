import uWS from 'uWebSockets.js';
import { PlatformError } from '../../runtime/errors.js';
import type { QueryObject, QueryValue, UploadedFile } from './types.js';

/**
 * Body and query decoding. Form-style keys use PHP/Laravel bracket notation, so
 * `links[0][link]=...` and `tool_ids[]=1` arrive as the same structures a JSON body would give.
 */

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

type Container = Record<string, unknown> | unknown[];

const isArrayKey = (part: string | undefined): boolean => part === '' || /^\d+$/.test(part ?? '');

/** Sets `target[a][b][]` style paths; numeric and empty segments make arrays. */
function assign(target: QueryObject, key: string, value: string): void {
  const match = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
  if (!match) {
    if (!FORBIDDEN_KEYS.has(key)) target[key] = value;
    return;
  }
  const path = [match[1]!, ...[...match[2]!.matchAll(/\[([^[\]]*)\]/g)].map((m) => m[1]!)];
  if (path.some((part) => FORBIDDEN_KEYS.has(part)) || path.length > 6) return;
  let current: Container = target;
  for (let i = 0; i < path.length; i++) {
    const part = path[i]!;
    const last = i === path.length - 1;
    let slot: string | number = part;
    if (Array.isArray(current)) {
      slot = part === '' ? current.length : Number(part);
      if (!Number.isInteger(slot) || slot < 0 || slot > 1000) return;
    }
    const holder = current as Record<string | number, unknown>;
    if (last) {
      holder[slot] = value;
      return;
    }
    const existing = holder[slot];
    if (existing === undefined || typeof existing !== 'object' || existing === null) holder[slot] = isArrayKey(path[i + 1]) ? [] : {};
    current = holder[slot] as Container;
  }
}

export function parseQuery(raw: string): QueryObject {
  const result: QueryObject = {};
  if (raw === '') return result;
  for (const [key, value] of new URLSearchParams(raw)) assign(result, key, value);
  return result;
}

export function parseJson(body: Buffer): unknown {
  if (body.length === 0) return {};
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (cause) {
    throw new PlatformError('invalid_json', { cause });
  }
}

export interface MultipartBody {
  readonly fields: QueryObject;
  readonly files: Record<string, UploadedFile>;
}

/**
 * The boundary of a multipart content type, however it is written (`Boundary=`, quoted, after
 * other parameters), in the one form uWS's parser reads.
 */
function normalizedMultipart(contentType: string): string {
  const boundary = /;\s*boundary\s*=\s*(?:"([^"]*)"|([^;\s]+))/i.exec(contentType);
  const value = boundary?.[1] ?? boundary?.[2];
  return value ? `multipart/form-data; boundary=${value}` : contentType;
}

export function parseMultipart(body: Buffer, contentType: string): MultipartBody {
  const parts = uWS.getParts(body, normalizedMultipart(contentType));
  if (!parts || (parts.length === 0 && body.length > 0)) throw new PlatformError('bad_request', { message: 'The multipart body could not be parsed.' });
  const fields: QueryObject = {};
  const files: Record<string, UploadedFile> = Object.create(null) as Record<string, UploadedFile>;
  for (const part of parts) {
    // A part without a name, or named like a property every object has, is nobody's field.
    if (!part.name || FORBIDDEN_KEYS.has(part.name)) continue;
    if (part.filename !== undefined) {
      files[part.name] = {
        field: part.name,
        filename: part.filename,
        contentType: part.type ?? 'application/octet-stream',
        data: Buffer.from(new Uint8Array(part.data)),
      };
    } else {
      assign(fields, part.name, Buffer.from(part.data).toString('utf8'));
    }
  }
  return { fields, files };
}
