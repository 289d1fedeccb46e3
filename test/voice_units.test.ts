import t from 'tap';
import { ManualClock } from '../runtime/clock.js';
import { Downsampler, FRAME_SAMPLES, Upsampler, allocSamples, ambientBed, levelDb, mulawDecode, mulawEncode, random, voicedSpeech } from '../runtime/voice/audio.js';
import { NoiseSuppressor } from '../runtime/voice/hearing/denoise.js';
import { ReferenceNoiseSuppressor } from './helpers/denoiseReference.js';
import { concat, frames, mix, silence, speechClip, whiteNoise } from './helpers/vadAudio.js';
import { PAUSE_REWIND_MS, Playout } from '../runtime/voice/speaking/playout.js';
import { Resampler } from '../runtime/voice/providers/types.js';
import { SentenceChunker } from '../runtime/voice/speaking/sentences.js';
import { EnergyVad, dropsAsBackchannel, endpointDelayMs, interruptDelayMs, isBackchannel, looksUnfinished, semanticEagerness } from '../runtime/voice/hearing/turns.js';
import { withinBusinessHours } from '../runtime/voice/speaking/builtins.js';
import { MediaMessageWriter, base64Into, mediaPayload, mediaPrefix } from '../runtime/voice/serializers/twilio.js';

/** The pure parts of the voice engine: codecs, resampling, VAD, turn policy, denoising, playout. */

const noise = (seed: number, amplitude: number) => {
  const rand = random(seed);
  return () => Int16Array.from({ length: FRAME_SAMPLES }, () => Math.round((rand() * 2 - 1) * amplitude));
};
const tone = (index: number, amplitude = 6_000) => Int16Array.from({ length: FRAME_SAMPLES }, (_, i) => Math.round(Math.sin((2 * Math.PI * 200 * (index * FRAME_SAMPLES + i)) / 16_000) * amplitude));

t.test('mu-law round trip and resampling keep the signal', async (t) => {
  const frame = tone(0);
  const back = mulawDecode(mulawEncode(frame));
  let error = 0;
  for (let i = 0; i < frame.length; i++) error = Math.max(error, Math.abs(back[i]! - frame[i]!));
  t.ok(error < 300, `mu-law error ${error}`);
  const down = new Downsampler().process(frame);
  t.equal(down.length, 160);
  const up = new Upsampler().process(down);
  t.equal(up.length, 320);
  t.ok(Math.abs(levelDb(up) - levelDb(frame)) < 1, 'level kept through 16 k -> 8 k -> 16 k');
  const to24 = new Resampler(16_000, 24_000);
  let samples = 0;
  for (let i = 0; i < 50; i++) samples += to24.process(tone(i)).length;
  t.ok(Math.abs(samples - 24_000) <= 1, `one second at 24 kHz: ${samples} samples`);
});

t.test('the fused media paths equal the step-by-step ones; slab frames are zeroed and independent', async (t) => {
  for (let length = 0; length <= 9; length++) {
    const bytes = Uint8Array.from({ length }, (_, i) => (i * 97 + length * 13) & 0xff);
    const target = new Uint8Array(16);
    const end = base64Into(bytes, length, target, 2);
    t.equal(Buffer.from(target.subarray(2, end)).toString('latin1'), Buffer.from(bytes).toString('base64'), `base64 of ${length} bytes`);
  }
  const writer = new MediaMessageWriter(mediaPrefix('MZ42'));
  const reference = new Downsampler();
  for (let index = 0; index < 3; index++) {
    const frame = tone(index);
    const message = Buffer.from(writer.frame(frame));
    const expected = `${mediaPrefix('MZ42')}${mulawEncode(reference.process(frame)).toString('base64')}"}}`;
    t.equal(message.toString('latin1'), expected, `outbound frame ${index}`);
    t.same(Buffer.from(mediaPayload(message)!), Buffer.from(JSON.parse(expected).media.payload, 'base64'), 'the payload reads back');
  }
  for (const length of [0, 1, 2, 3, 160]) {
    const bytes = Buffer.from(Uint8Array.from({ length }, (_, i) => (i * 151) & 0xff));
    const message = (payload: string) => Buffer.from(`{"event":"media","media":{"track":"inbound","payload":"${payload}"}}`);
    t.same(Buffer.from(mediaPayload(message(bytes.toString('base64')))!), bytes, `inbound payload of ${length} bytes`);
    t.same(Buffer.from(mediaPayload(message(bytes.toString('base64').replaceAll('/', '\\/')))!), bytes, `escaped, ${length} bytes`);
  }
  t.equal(mediaPayload(Buffer.from('{"event":"mark","mark":{"name":"x"}}')), undefined, 'not media');
  t.equal(mediaPayload(Buffer.from('{"event":"media","media":{"track":"outbound","payload":"AAAA"}}')), undefined, 'an outbound echo');
  const encoded = mulawEncode(tone(5).subarray(0, 160));
  const fused = new Upsampler().processMulaw(encoded);
  t.same(fused, new Upsampler().process(mulawDecode(encoded)), 'mu-law to 16 kHz in one pass');
  const a = allocSamples(FRAME_SAMPLES);
  const b = allocSamples(FRAME_SAMPLES);
  t.ok(a.every((v) => v === 0) && b.every((v) => v === 0), 'zeroed');
  a.fill(7);
  t.ok(b.every((v) => v === 0), 'independent');
  t.equal(allocSamples(100_000).length, 100_000, 'large arrays are their own');
});

t.test('the VAD learns steady noise and still hears speech', async (t) => {
  const vad = new EnergyVad();
  const hiss = noise(1, 800);
  let falseSpeech = 0;
  for (let i = 0; i < 150; i++) if (vad.process(hiss()) && i > 50) falseSpeech++;
  t.equal(falseSpeech, 0, 'steady noise is not speech');
  const verdicts = Array.from({ length: 10 }, (_, i) => vad.process(tone(i)));
  t.same(verdicts.slice(0, 2), [false, false], 'not before the onset');
  t.ok(verdicts.slice(2).every(Boolean), 'speech after 60 ms');
  const after = Array.from({ length: 6 }, () => vad.process(new Int16Array(FRAME_SAMPLES)));
  t.same(after, [true, true, true, true, false, false], 'a dip of up to 80 ms is bridged; 100 ms of silence ends it');
});

t.test('turn policy: documented mappings, unfinished words, backchannels, business hours', async (t) => {
  t.equal(endpointDelayMs(0.5, 'vad', 'Hello.'), 500);
  t.equal(endpointDelayMs(0, 'vad', ''), 200);
  t.equal(endpointDelayMs(5, 'vad', ''), 5_000);
  t.equal(endpointDelayMs(0.5, 'ai', 'My number is 0151'), 1_200);
  t.equal(endpointDelayMs(0.5, 'ai', 'That is all.'), 500);
  t.equal(endpointDelayMs(4, 'ai', 'and'), 6_000);
  t.equal(interruptDelayMs(0.5), 500);
  t.equal(interruptDelayMs(0), 60);
  t.same([0, 0.3, 0.5, 1, 1.5, 5].map((sensitivity) => semanticEagerness(endpointDelayMs(sensitivity, 'vad', ''))), ['high', 'high', 'medium', 'medium', 'low', 'low']);
  for (const text of ['I want to order and', 'so, um', 'it is 4 5', 'because', 'wait,']) t.ok(looksUnfinished(text), text);
  for (const text of ['That is all.', 'Really?', '']) t.notOk(looksUnfinished(text), text);
  for (const text of ['mm-hmm', 'Okay.', 'yeah yeah', 'uh-huh', 'I see']) t.ok(isBackchannel(text), text);
  for (const text of ['no', 'wait stop', 'okay but what about the price']) t.notOk(isBackchannel(text), text);
  t.ok(dropsAsBackchannel('yeah', true, false), 'judged a backchannel as it began, and it was one');
  t.ok(dropsAsBackchannel('mhm', false, true), 'a backchannel over the agent');
  t.notOk(dropsAsBackchannel('Yeah, so what about Tuesday at ten?', true, false), 'began like one, then said more: a turn');
  t.notOk(dropsAsBackchannel('okay', false, false), 'an answer when the agent was quiet');
  t.ok(withinBusinessHours(Date.UTC(2026, 10, 24, 10), 'UTC'), 'Tuesday 10:00');
  t.notOk(withinBusinessHours(Date.UTC(2026, 10, 24, 10), 'Asia/Tokyo'), 'Tuesday 19:00 in Tokyo');
  t.notOk(withinBusinessHours(Date.UTC(2026, 10, 22, 10), 'UTC'), 'Sunday');
});

t.test('the noise suppressor takes steady noise down by at least 15 dB and keeps speech', async (t) => {
  const suppressor = new NoiseSuppressor();
  const hiss = noise(3, 1_500);
  let noiseIn = 0;
  let noiseOut = 0;
  for (let i = 0; i < 100; i++) {
    const frame = hiss();
    const out = suppressor.process(frame);
    if (i >= 40) {
      noiseIn += levelDb(frame);
      noiseOut += levelDb(out);
    }
  }
  t.ok(noiseIn / 60 - noiseOut / 60 >= 15, `noise ${(noiseIn / 60).toFixed(1)} -> ${(noiseOut / 60).toFixed(1)} dBFS`);
  let speechIn = 0;
  let speechOut = 0;
  for (let i = 0; i < 50; i++) {
    const frame = tone(i);
    const mixed = Int16Array.from(frame, (v, k) => v + (hiss()[k] ?? 0));
    const out = suppressor.process(mixed);
    if (i >= 10) {
      speechIn += levelDb(mixed);
      speechOut += levelDb(out);
    }
  }
  t.ok(speechIn / 40 - speechOut / 40 < 3, `speech ${(speechIn / 40).toFixed(1)} -> ${(speechOut / 40).toFixed(1)} dBFS`);
});

t.test('the noise suppressor sounds as when each hop had its own FFTs', async (t) => {
  // Speech with pauses over white noise, about 13 s: loud frames pass at gain 1, pauses sit at the
  // -20 dB floor, where 0.1 x an integer often lands on a .5 tie that rounding may flip.
  const input = frames(mix(concat(speechClip('booking-en'), silence(1500), speechClip('confirm-en-f'), silence(1000), speechClip('termin-de')), whiteNoise(3000, 0.01, 3)));
  const reference = new ReferenceNoiseSuppressor();
  const suppressor = new NoiseSuppressor();
  let samples = 0;
  let lengthsDiffer = 0;
  let differing = 0;
  let maxDifference = 0;
  for (const frame of input) {
    const expected = reference.process(frame);
    const actual = suppressor.process(frame);
    if (actual.length !== expected.length) lengthsDiffer++;
    for (let i = 0; i < expected.length; i++) {
      const difference = Math.abs(actual[i]! - expected[i]!);
      if (difference > 0) differing++;
      maxDifference = Math.max(maxDifference, difference);
    }
    samples += expected.length;
  }
  t.ok(input.length > 500, `${input.length} frames`);
  t.equal(lengthsDiffer, 0, 'every frame as long as the reference frame');
  t.ok(maxDifference <= 1, `at most 1 LSB apart (${maxDifference})`);
  t.ok(differing / samples < 0.01, `${differing} of ${samples} samples differ by rounding`);
});

t.test('sentences are cut for speaking as they complete', async (t) => {
  const chunker = new SentenceChunker();
  t.same(chunker.push('Hello there. How '), ['Hello there.']);
  t.same(chunker.push('are you today? Fine'), ['How are you today?']);
  t.same(chunker.push(' thanks'), []);
  t.same(chunker.flush(), ['Fine thanks']);
});

t.test('sentences: a short one waits for the next, long unpunctuated text is cut at a word, Chinese and Japanese ends count', async (t) => {
  const chunker = new SentenceChunker();
  t.same(chunker.push('Hi. '), [], 'too short to speak alone');
  t.same(chunker.push('How can I help you today? Our'), ['Hi. How can I help you today?'], 'spoken with the sentence after it');
  t.same(chunker.flush(), ['Our']);

  // A short sentence, then more than MAX_SENTENCE characters with no end: once looped for ever.
  const words = Array.from({ length: 60 }, (_, i) => `item${i}`).join(' ');
  const pieces = [...chunker.push(`Ok. ${words}`), ...chunker.flush()];
  t.ok(pieces.length >= 2, `${pieces.length} pieces`);
  t.ok(pieces.every((piece) => piece.length <= 200), 'each piece at most 200 characters');
  t.ok(pieces.slice(0, -1).every((piece) => /item\d+$/.test(piece)), 'cut between words');
  t.equal(pieces.join(' '), `Ok. ${words}`, 'nothing lost or reordered');

  const numbers = [...chunker.push(`abcde${'x9,5:30;'.repeat(40)}end`), ...chunker.flush()];
  t.ok(numbers.slice(0, -1).every((piece) => piece.endsWith(';')), 'no spaces: cut after a clause mark, not inside "9,5" or "5:30"');
  t.equal(numbers.join(''), `abcde${'x9,5:30;'.repeat(40)}end`);
  const unbroken = 'x'.repeat(450);
  t.same([...chunker.push(unbroken), ...chunker.flush()].map((piece) => piece.length), [200, 200, 50], 'no spaces at all: cut at 200');
  const emoji = `${'y'.repeat(199)}😀${'y'.repeat(10)}`;
  const halves = [...chunker.push(emoji), ...chunker.flush()];
  t.equal(halves.join(''), emoji);
  t.ok(halves.every((piece) => !/[\uD800-\uDBFF]$/.test(piece)), 'an emoji is never split into its two halves');

  t.same(chunker.push('您好，我可以帮您查询订单。请告诉我订单号！谢'), ['您好，我可以帮您查询订单。'], 'full-width ends need no space after them');
  t.same(chunker.push('谢。'), [], 'the rest is still short');
  t.same(chunker.flush(), ['请告诉我订单号！谢谢。']);
  t.same(chunker.push('एक पल, जाँच हो रही है। आपका ऑर्डर'), ['एक पल, जाँच हो रही है।'], 'the danda ends a Hindi sentence');
  t.same(chunker.flush(), ['आपका ऑर्डर']);
  const dots = [...chunker.push('.'.repeat(50_000)), ...chunker.flush()];
  t.equal(dots.join('').length, 50_000, 'one delta of 50,000 dots is cut without scanning it whole for every piece');
  t.same(chunker.push('The total is 3.5 dollars'), [], 'a decimal point is not an end');
  t.same(chunker.flush(), ['The total is 3.5 dollars']);
});

t.test('playout: the first frame at once, then each on its 20 ms schedule, marks, ambient bed, clear', async (t) => {
  const clock = new ManualClock(0);
  const sent: number[] = [];
  const marks: string[] = [];
  let clears = 0;
  const frames: Int16Array[] = [];
  const playout = new Playout({ audio: (f) => (sent.push(clock.now()), frames.push(f)), mark: (m) => marks.push(m), clear: () => clears++ }, clock, undefined);
  const text = 'one two three four five six seven eight nine ten';
  const segment = playout.begin(text);
  playout.push(segment, voicedSpeech(text));
  playout.finish(segment);
  t.same(sent, [0], 'the first frame leaves at once');
  for (let i = 0; i < 40; i++) {
    clock.advance(5);
    playout.tick();
  }
  t.same(sent.slice(0, 11), [0, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200], 'then one every 20 ms, never a burst');
  const cut = playout.clear();
  t.equal(clears, 1);
  t.ok(cut[0]!.heard.split(' ').length < 10 && text.startsWith(cut[0]!.heard), `heard "${cut[0]!.heard}"`);
  t.equal(marks.length, 0, 'no mark for an unfinished segment');

  const short = playout.begin('hi');
  playout.push(short, voicedSpeech('hi'));
  playout.finish(short);
  for (let i = 0; i < 100 && marks.length === 0; i++) {
    clock.advance(5);
    playout.tick();
  }
  t.same(marks, [`seg-${short.id}`], 'a mark after the last frame of a segment');
  let drained = false;
  playout.onDrained = () => (drained = true);
  playout.acknowledge(marks[0]!);
  t.ok(drained, 'drained when the mark comes back');

  const bedSent: Int16Array[] = [];
  const bed = new Playout({ audio: (f) => bedSent.push(f), mark: () => {}, clear: () => {} }, clock, { bed: ambientBed('cafe'), gain: 0.5 });
  for (let i = 0; i < 20; i++) {
    clock.advance(5);
    bed.tick();
  }
  t.equal(bedSent.length, 5, 'the ambient bed plays every 20 ms while the agent is silent');
  const level = levelDb(bedSent.at(-1)!);
  t.ok(level < -30 && level > -60, `bed level ${level.toFixed(1)} dBFS`);
});

t.test('playout: a pause holds the speech and drops what the carrier buffered; resume goes on from what was heard', async (t) => {
  const clock = new ManualClock(0);
  const sent: Int16Array[] = [];
  const marks: string[] = [];
  let clears = 0;
  const playout = new Playout({ audio: (f) => sent.push(f), mark: (m) => marks.push(m), clear: () => clears++ }, clock, undefined);
  const run = (ms: number) => {
    for (let i = 0; i < ms / 5; i++) {
      clock.advance(5);
      playout.tick();
    }
  };
  const text = 'one two three four five six seven eight nine ten';
  const segment = playout.begin(text);
  const speech = voicedSpeech(text);
  playout.push(segment, speech);
  playout.finish(segment);
  run(1_000);
  const before = segment.sent;
  playout.pause();
  t.equal(clears, 1, 'the carrier drops its buffer');
  t.equal(segment.sent, before - PAUSE_REWIND_MS / 20, `the last ${PAUSE_REWIND_MS} ms are to be sent again`);
  const count = sent.length;
  run(1_000);
  t.equal(sent.length, count, 'nothing goes out while paused');
  t.ok(playout.busy, 'the agent still has speech to say');
  const extra = playout.begin('more');
  playout.push(extra, voicedSpeech('more'));
  playout.finish(extra);
  t.equal(sent.length, count, 'speech pushed while paused waits');
  playout.resume();
  t.same(sent[count], segment.frames[before - PAUSE_REWIND_MS / 20], 'resumed with the first frame not surely heard');
  run(10_000);
  t.equal(segment.sent, segment.frames.length, 'then the rest of the segment');
  t.equal(extra.sent, extra.frames.length, 'and what came meanwhile');
  t.same(marks, [`seg-${segment.id}`, `seg-${extra.id}`], 'each marked once');

  // A pause long after the last frame rewinds nothing: that speech was heard.
  const late = playout.begin('late');
  playout.push(late, voicedSpeech('late'));
  playout.finish(late);
  run(5_000);
  playout.acknowledge(`seg-${late.id}`);
  const whole = late.sent;
  clock.advance(PAUSE_REWIND_MS);
  playout.pause();
  t.equal(late.sent, whole, 'nothing to send again');
  // A clear while paused (the interruption stands) ends the pause for the next response.
  playout.clear();
  const next = playout.begin('next');
  playout.push(next, voicedSpeech('next'));
  t.ok(next.sent > 0, 'the next response plays at once');
});

t.test('the manual clock runs timers in order at their own time', async (t) => {
  const clock = new ManualClock(0);
  const seen: string[] = [];
  clock.setTimeout(() => seen.push(`b@${clock.now()}`), 20);
  clock.setTimeout(() => {
    seen.push(`a@${clock.now()}`);
    clock.setTimeout(() => seen.push(`c@${clock.now()}`), 5);
  }, 10);
  const cancelled = clock.setTimeout(() => seen.push('never'), 15);
  clock.clearTimeout(cancelled);
  clock.advance(30);
  t.same(seen, ['a@10', 'c@15', 'b@20']);
  t.equal(clock.now(), 30);
});
