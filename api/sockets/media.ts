import { FRAME_SAMPLES, allocSamples } from '../../runtime/voice/audio.js';

/** Regroups incoming audio of any chunk size into whole 20 ms frames of 16 kHz PCM16. */
export class FrameAssembler {
  private pending = allocSamples(FRAME_SAMPLES);
  private filled = 0;

  constructor(private readonly onFrame: (frame: Int16Array) => void) {}

  push(samples: Int16Array): void {
    if (this.filled === 0 && samples.length === FRAME_SAMPLES) {
      this.onFrame(samples);
      return;
    }
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(FRAME_SAMPLES - this.filled, samples.length - offset);
      this.pending.set(samples.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
      if (this.filled === FRAME_SAMPLES) {
        this.onFrame(this.pending);
        this.pending = allocSamples(FRAME_SAMPLES);
        this.filled = 0;
      }
    }
  }
}

/** Outgoing audio is dropped rather than queued without bound when a client stops reading. */
export const MAX_BUFFERED_BYTES = 512 * 1024;
