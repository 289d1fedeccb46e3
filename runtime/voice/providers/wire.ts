import type WebSocket from 'ws';
import { stallGuard } from '../../net/stall.js';
import { bytesToSamples } from '../audio.js';
import type { TtsRequest } from './types.js';

/**
 * What the vendor adapters share: reading their JSON frames, keeping a vendor's fault inside the
 * call it belongs to, and streaming PCM16 out of an HTTP body with a stall limit.
 */

/** A vendor's JSON text frame when it is an object (`null`, a number or an array is not a message). */
export function parseObject(data: WebSocket.RawData): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(data.toString());
  } catch {
    return undefined;
  }
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

/** A transcription vendor answered an error status, or nothing in time (`status` undefined). */
export class TranscriptionFailed extends Error {
  override readonly name = 'TranscriptionFailed';
  /** Worth another try later: the vendor was busy, failing or silent (not a refused key or file). */
  readonly retryable: boolean;
  constructor(readonly vendor: string, readonly status: number | undefined, readonly code: string | undefined, options?: { cause?: unknown }) {
    super(status === undefined ? `the ${vendor} transcription request failed${code ? ` (${code})` : ''}` : `the ${vendor} transcription request answered HTTP ${status}${code ? ` (${code})` : ''}`, options);
    this.retryable = status === undefined || status === 429 || status >= 500;
  }
}

export const objectOr = (value: unknown): Record<string, unknown> => (value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : {});

/**
 * Handles one frame of a vendor socket. What it sets off (the call's reaction included) runs in a
 * ws listener, where an exception would end the process and every call in it: one that escapes
 * fails this call's stream instead.
 */
export function vendorMessage(handle: () => void, failed: (error: Error) => void): void {
  try {
    handle();
  } catch (error) {
    try {
      failed(error instanceof Error ? error : new Error(String(error)));
    } catch {
      // The call's own failure handling threw as well: the stream is closed by then, and the call's end is on its way.
    }
  }
}

/** PCM16 byte chunks of any length (odd boundaries included) as whole samples. */
async function* pcmChunks(body: ReadableStream<Uint8Array>, signal: AbortSignal): AsyncIterable<Int16Array> {
  let carry: Uint8Array | undefined;
  const reader = body.getReader();
  try {
    while (!signal.aborted) {
      const { done, value } = await reader.read();
      if (done) break;
      let bytes = value;
      if (carry) {
        const joined = new Uint8Array(carry.length + bytes.length);
        joined.set(carry);
        joined.set(bytes, carry.length);
        bytes = joined;
        carry = undefined;
      }
      if (bytes.length % 2 === 1) {
        carry = bytes.slice(bytes.length - 1);
        bytes = bytes.subarray(0, bytes.length - 1);
      }
      if (bytes.length > 0) yield bytesToSamples(bytes).slice();
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** A voice that stops sending is given up after this (fetch has no timeout of its own once headers arrive). */
export const TTS_STALL_MS = 10_000;

/** Streams a TTS response's PCM as whole samples, failing clearly when the vendor goes quiet. */
export async function* guardedSpeech(vendor: string, request: TtsRequest, stallMs: number, open: (signal: AbortSignal) => Promise<Response>): AsyncIterable<Int16Array> {
  const guard = stallGuard(request.signal, stallMs);
  try {
    const response = await open(guard.signal);
    if (!response.ok || !response.body) throw await failure(response, vendor);
    guard.touch();
    for await (const chunk of pcmChunks(response.body, guard.signal)) {
      guard.touch();
      yield chunk;
    }
    if (guard.stalled) throw new Error(`${vendor} sent no audio for ${Math.round(stallMs / 1000)} s`);
  } catch (error) {
    if (guard.stalled) throw new Error(`${vendor} sent no audio for ${Math.round(stallMs / 1000)} s`, { cause: error });
    throw error;
  } finally {
    guard.dispose();
  }
}

async function failure(response: Response, vendor: string): Promise<Error> {
  const text = await response.text().catch(() => '');
  return new Error(`${vendor} answered HTTP ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`);
}
