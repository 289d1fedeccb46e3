import { parentPort } from 'node:worker_threads';
import initialize from '@echogarden/espeak-ng-emscripten';
import { BandLimitedResampler } from '../runtime/voice/resample.js';
import type { SpeakMessage, SpeechReply, SpeechRequest } from './speechProtocol.js';

/**
 * The speech synthesis worker thread (one per process, see `speechProtocol.ts`): espeak-ng, as the
 * WebAssembly build with its voice data shipped in `@echogarden/espeak-ng-emscripten`, turns text
 * into speech at 22 050 Hz, resampled here to the calls' 16 kHz. Requests are cut into clauses and
 * taken in turns, one clause at a time, so a long text delays another request by one clause at
 * most; cancelled requests are dropped between clauses. Any failure to load ends the thread.
 */

const ESPEAK_RATE = 22_050;
const OUTPUT_RATE = 16_000;

const port = parentPort!;
const loadStarted = performance.now();
const espeak = new (await initialize()).eSpeakNGWorker();

interface Job {
  readonly request: SpeakMessage;
  readonly clauses: string[];
  readonly resampler: BandLimitedResampler;
  synthMs: number;
  samples: number;
}

/** Clauses to speak one at a time: sentences, and long sentences at their commas. */
function clauses(text: string): string[] {
  const parts = text.match(/[^.!?;:]+(?:[.!?;:]+|$)/g) ?? [text];
  return parts.flatMap((part) => (part.length > 160 ? (part.match(/[^,]+(?:,|$)/g) ?? [part]) : [part])).map((part) => part.trim()).filter(Boolean);
}

const jobs: Job[] = [];
let running = false;

function send(reply: SpeechReply, transfer: ArrayBuffer[] = []): void {
  port.postMessage(reply, transfer);
}

/** Speaks one clause of `job`, sending its audio as espeak produces it. */
function speakClause(job: Job, clause: string): void {
  const { request } = job;
  const started = performance.now();
  const voice = espeak.set_voice(request.voice) === 0 ? request.voice : 'en-us';
  if (voice !== request.voice) espeak.set_voice(voice);
  espeak.set_rate(request.rate);
  espeak.set_pitch(request.pitch);
  espeak.synthesize(clause, (samples) => {
    if (!samples || samples.length === 0) return;
    const out = job.resampler.process(samples);
    job.samples += out.length;
    if (out.length > 0) send({ type: 'audio', id: request.id, samples: out }, [out.buffer as ArrayBuffer]);
  });
  job.synthMs += performance.now() - started;
}

/** Takes the jobs in turns, a clause each, yielding to the port between clauses. */
async function run(): Promise<void> {
  if (running) return;
  running = true;
  while (jobs.length > 0) {
    const job = jobs.shift()!;
    const clause = job.clauses.shift();
    try {
      if (clause !== undefined) speakClause(job, clause);
      if (job.clauses.length > 0) jobs.push(job);
      else {
        const tail = job.resampler.flush();
        job.samples += tail.length;
        if (tail.length > 0) send({ type: 'audio', id: job.request.id, samples: tail }, [tail.buffer as ArrayBuffer]);
        send({ type: 'done', id: job.request.id, synthMs: job.synthMs, samples: job.samples });
      }
    } catch (error) {
      send({ type: 'failed', id: job.request.id, message: error instanceof Error ? error.message : String(error) });
    }
    // New requests and cancellations are read between clauses.
    await new Promise((resolve) => setImmediate(resolve));
  }
  running = false;
}

port.on('message', (message: SpeechRequest) => {
  if (message.type === 'cancel') {
    const index = jobs.findIndex((job) => job.request.id === message.id);
    if (index !== -1) jobs.splice(index, 1);
    return;
  }
  jobs.push({ request: message, clauses: clauses(message.text), resampler: new BandLimitedResampler(ESPEAK_RATE, OUTPUT_RATE), synthMs: 0, samples: 0 });
  void run();
});
send({ type: 'ready', loadMs: performance.now() - loadStarted });
