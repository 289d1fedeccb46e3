import { levelDb } from '../../audio.js';
import type { Vad, VadSource } from './vad.js';

/**
 * The energy VAD: a frame is speech when its level is at least 12 dB above an adaptive noise
 * floor and above -50 dBFS; speech starts after 3 such frames in a row (60 ms), so clicks and
 * single bursts do not count, and ends after 100 ms without one (short dips between words do not
 * end it). The floor starts at the first frame's level (at most -45 dBFS), follows quieter frames
 * quickly and rises slowly, so steady background noise is learned and ignored. It cannot tell a
 * voice from a cough, a door or a television: any sound loud enough is speech.
 */

export const SPEECH_ONSET_FRAMES = 3;
/** Speech continues through dips this short (between syllables and words). */
export const HANGOVER_FRAMES = 4;
const MARGIN_DB = 12;
const ABSOLUTE_MIN_DB = -50;
const INITIAL_FLOOR_DB = -45;

export class EnergyVad implements Vad {
  private floor: number | undefined;
  private run = 0;
  private quiet = 0;
  /** True from the onset of speech until a non-speech frame. */
  speaking = false;
  /** Whether the last frame was loud enough for speech (inside speech, false on the dips it spans). */
  loud = false;

  /** Classifies one frame; returns whether it is (confirmed) speech. */
  process(frame: Int16Array): boolean {
    const level = levelDb(frame);
    const floor = (this.floor ??= Math.max(-70, Math.min(INITIAL_FLOOR_DB, level)));
    const loud = (this.loud = level > ABSOLUTE_MIN_DB && level > floor + MARGIN_DB);
    this.run = loud ? this.run + 1 : 0;
    // Down fast to quieter frames; up slowly, and very slowly while it sounds like speech, so a
    // steady noise is learned within seconds but a long sentence barely moves the floor.
    const rate = level < floor ? 0.5 : loud ? 0.002 : 0.05;
    this.floor = floor + (level - floor) * rate;
    if (this.run >= SPEECH_ONSET_FRAMES) {
      this.speaking = true;
      this.quiet = 0;
    } else if (this.speaking && !loud && ++this.quiet > HANGOVER_FRAMES) this.speaking = false;
    return this.speaking;
  }

  close(): void {}
}

/** `VOICE_VAD=energy`: nothing to start or stop. */
export const energyVads: VadSource = {
  name: 'energy',
  open: () => new EnergyVad(),
  settled: async () => {},
  close: async () => {},
};
