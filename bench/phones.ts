import { MediaStreamPhone, callerSpeechFrame } from '../runtime/calls/carriers/loopback.js';
import { Downsampler, FRAME_SAMPLES, mulawDecode, mulawEncode } from '../runtime/voice/audio.js';

/**
 * The far end of the calls benchmark, in its own process so its work does not count as the
 * server's: simulated phones over the Twilio media-stream protocol. The parent sends
 * `{dial: {streamUrl, token, callId, carrierCallId}}` for each call the loopback carrier places;
 * every phone streams a 20 ms frame every 20 ms (one timer for all), speaks for `talkMs` every
 * `turnMs`, and measures what it hears: the gap between the agent's frames (jitter) and the time
 * from its last speech frame to the agent's first audio (voice-to-voice, including the server's
 * end-of-turn silence). `{report: true}` answers with the figures so far and resets them;
 * `{hangUp: true}` ends every call.
 */

interface Dial {
  readonly streamUrl: string;
  readonly token: string;
  readonly callId: number;
  readonly carrierCallId: string;
}

const talkMs = Number(process.env.TALK_MS ?? 1_200);
const turnMs = Number(process.env.TURN_MS ?? 4_000);

// The caller's audio is encoded once; every phone sends the same payloads.
const downsampler = new Downsampler();
const encode = (frame: Int16Array) => mulawEncode(downsampler.process(frame)).toString('base64');
const SPEECH = Array.from({ length: 40 }, (_, i) => encode(callerSpeechFrame(i)));
const SILENCE = encode(new Int16Array(FRAME_SAMPLES));
/** Mean square of each mu-law byte, so a frame's level needs no decoding. */
const SQUARES = Float64Array.from(mulawDecode(Uint8Array.from({ length: 256 }, (_, i) => i)), (v) => v * v);
function payloadDb(payload: Uint8Array): number {
  let sum = 0;
  for (const byte of payload) sum += SQUARES[byte]!;
  return sum === 0 ? -100 : 10 * Math.log10(sum / payload.length / (32_768 * 32_768));
}

interface Phone {
  readonly line: MediaStreamPhone;
  readonly offset: number;
  started: number;
  spoken: number;
  lastSpeechAt: number | undefined;
  waiting: boolean;
  talking: boolean;
  lastAgentFrameAt: number | undefined;
}

const phones: Phone[] = [];
let gaps: number[] = [];
let voiceToVoice: number[] = [];
let agentFrames = 0;

function dial(call: Dial): void {
  const line = new MediaStreamPhone(call.streamUrl, { callSid: call.carrierCallId, customParameters: { call_id: String(call.callId), token: call.token } }, { decode: false });
  const phone: Phone = { line, offset: Math.floor(Math.random() * turnMs), started: 0, spoken: 0, lastSpeechAt: undefined, waiting: false, talking: false, lastAgentFrameAt: undefined };
  line.on('payload', (payload) => {
    const now = performance.now();
    agentFrames++;
    const previous = phone.lastAgentFrameAt;
    phone.lastAgentFrameAt = now;
    if (previous !== undefined && now - previous < 200) gaps.push(now - previous);
    const startsUtterance = previous === undefined || now - previous >= 300;
    if (phone.waiting && startsUtterance && payloadDb(payload) > -40 && phone.lastSpeechAt !== undefined) {
      voiceToVoice.push(now - phone.lastSpeechAt);
      phone.waiting = false;
    }
  });
  line.open().then(
    () => {
      phone.started = performance.now();
      phones.push(phone);
    },
    () => {},
  );
}

/** Phones send in four groups, 5 ms apart, as independent callers would, not in one burst. */
const SLOTS = 4;
let tick = 0;
const start = performance.now();
function pump(): void {
  tick++;
  const now = performance.now();
  const slot = tick % SLOTS;
  for (const [i, phone] of phones.entries()) {
    if (phone.line.closed || i % SLOTS !== slot) continue;
    const position = (now - phone.started + phone.offset) % turnMs;
    if (position < talkMs && now - phone.started > 1_500) {
      const index = phone.spoken++ % SPEECH.length;
      phone.line.speakEncoded(SPEECH[index]!);
      phone.talking = true;
      if (index % 20 < 18) phone.lastSpeechAt = now;
      phone.waiting = false;
    } else {
      phone.line.speakEncoded(SILENCE);
      if (phone.talking) {
        phone.talking = false;
        phone.waiting = true;
      }
    }
  }
  const next = start + (tick + 1) * (20 / SLOTS) - performance.now();
  setTimeout(pump, Math.max(0, next));
}
pump();

process.on('message', (message: { dial?: Dial; report?: boolean; hangUp?: boolean }) => {
  if (message.dial) dial(message.dial);
  if (message.report) {
    process.send!({ gaps, voiceToVoice, agentFrames, connected: phones.filter((p) => !p.line.closed).length });
    gaps = [];
    voiceToVoice = [];
    agentFrames = 0;
  }
  if (message.hangUp) {
    for (const phone of phones.splice(0)) if (!phone.line.closed) phone.line.hangUp();
    process.send!({ hungUp: true });
  }
});
process.on('disconnect', () => process.exit(0));
