import type { Logger } from '../../../logger.js';
import { energyVads } from './energy.js';
import type { SileroEngineOptions } from './engine.js';
import { sileroVads } from './silero.js';
import type { VadSource } from './vad.js';

/** The longest start-up waits for the Silero model to load. */
const LOAD_TIMEOUT_MS = 15_000;

/**
 * The process's VAD as `VOICE_VAD` names it. Silero's worker is started and its model loaded
 * before calls are taken; if it cannot load (the model or onnxruntime missing or broken), the
 * error is logged and the process runs on the energy VAD rather than refusing to start.
 */
export async function startVad(kind: 'energy' | 'silero', logger: Logger, options: Partial<SileroEngineOptions> = {}): Promise<VadSource> {
  if (kind === 'energy') {
    logger.info({ vad: 'energy' }, 'voice activity detection');
    return energyVads;
  }
  let vads: ReturnType<typeof sileroVads> | undefined;
  try {
    vads = sileroVads({ ...options, logger });
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`The Silero model did not load within ${LOAD_TIMEOUT_MS} ms`)), LOAD_TIMEOUT_MS).unref());
    await Promise.race([vads.engine.ready, timeout]);
    logger.info({ vad: 'silero' }, 'voice activity detection');
    return vads;
  } catch (error) {
    await vads?.close();
    logger.error({ err: error, vad: 'energy' }, 'the Silero VAD could not be started; calls use the energy VAD');
    return energyVads;
  }
}
