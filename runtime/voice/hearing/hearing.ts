import type { Clock } from '../../clock.js';
import { FRAME_MS } from '../audio.js';
import type { SttStream } from '../providers/types.js';
import type { CallSpec } from '../spec.js';
import { NoiseSuppressor } from './denoise.js';
import { EnergyVad, MIN_ENDPOINT_MS, dropsAsBackchannel, endpointDelayMs, interruptDelayMs, isBackchannel, takesTurn } from './turns.js';
import type { Vad } from './vad/vad.js';

/**
 * The caller's side of a call: each 20 ms frame goes through the noise suppressor (when the
 * assistant asks for it), the VAD and (pipeline) the transcriber; from them come the end of the
 * caller's turn, barge-in over the agent (a pause first, then the interruption standing or the
 * agent resuming: backchannels, coughs and `min_interrupt_words`), words said over the agent held
 * for later, keypad digits, and the first utterance's length that tells an
 * answering machine from a person. It owns no audio out and no model: it reports through
 * `HearingHooks`, and tests drive it frame by frame on a manual clock.
 */

export interface HearingHooks {
  /** The agent's state in the call's actor (`thinking`, `speaking`, `listening`, `away`, ...). */
  agentState(): string;
  /** Whether the agent's voice is still reaching the caller (its playout is busy). */
  agentAudible(): boolean;
  /** The caller began or stopped making sound. */
  speechStarted(): void;
  speechStopped(): void;
  /**
   * The caller's turn, in words. `heard`: when the caller was last heard and the end-of-turn
   * silence waited, for the voice-to-voice latency (none for keypad digits).
   */
  turn(text: string, heard?: { since: number; silence: number }): void;
  /** The caller interrupts the agent: it stops for good and listens. */
  interrupt(): void;
  /** The caller's sound over the agent may be an interruption: the agent's speech is held until `resume` or `interrupt`. */
  pause(): void;
  /** It was none (no words, a backchannel, too few words): the agent goes on from where it was last heard. */
  resume(): void;
  /** Whether the agent's speech is held by `pause`. */
  agentPaused(): boolean;
  /** The first utterance of an outbound call tells who answered (when the carrier did not). */
  answered(by: 'human' | 'machine'): void;
  /** The transcriber heard another of the call's languages. */
  languageDetected(code: string): void;
  /** The caller's audio, for a realtime model to hear (multimodal and dualplex). */
  realtimeAudio(frame: Int16Array): void;
  failed(kind: 'transcriber', error: Error): void;
}

/** Time a final transcript may take after the end of a turn before the turn settles without it (unless the transcriber says otherwise: `SttProvider.finalWaitMs`). */
const FINAL_TRANSCRIPT_WAIT_MS = 1_500;
/** Keys are collected until this pause, then reach the model as text. */
const DTMF_WAIT_MS = 1_500;
/** A first utterance this long is an answering machine's greeting. */
const MACHINE_GREETING_MS = 3_500;
/** The pause, after the VAD has let go of the speech, that ends the first utterance of an answered call. */
const FIRST_UTTERANCE_PAUSE_MS = 300;
/**
 * Speech over the agent counts toward `interrupt_sensitivity` through dips this short between its
 * sounds: the onset of a barge-in is timed from the caller's first sound, not by the frames a VAD
 * happened to call speech (Silero drops out on stops and commas more than the energy VAD does).
 */
const BARGE_BRIDGE_MS = 240;
/**
 * Speech over the paused agent this long with no words transcribed is an interruption: a caller
 * saying something (a transcriber that gives no words, or is slow to), not a backchannel or a cough.
 * Two-word backchannels said slowly ("okay, sure", "ja, genau") last up to 1.45 s in the project's
 * speech corpus, its shortest interruptions 1.52 s.
 */
export const WORDLESS_INTERRUPTION_MS = 1_500;
/**
 * A realtime call: how long the agent paused for the caller waits, after the model's VAD ended the
 * utterance, for the model's transcript of it before it resumes without words.
 */
export const REALTIME_WORDS_WAIT_MS = 2_000;

export class Hearing {
  private readonly vad: Vad;
  private readonly denoiser: NoiseSuppressor | undefined;
  private stt: SttStream | undefined;

  private speaking = false;
  private turnActive = false;
  private silenceMs = 0;
  /** Frames since the caller's last loud frame of speech. */
  private framesSinceLoud = 0;
  /** Silence since the VAD last heard speech (its hangover over dips between words not counted). */
  private pauseMs = 0;
  private bargeMs = 0;
  private finals: string[] = [];
  private interim = '';
  /** The transcripts of this utterance stand for speech, not words (`Transcript.wordless`). */
  private wordless = false;
  /** Speech in the current utterance (its dips not counted). */
  private utteranceMs = 0;
  /** A realtime call's utterance that paused the agent has ended: its words decide (`realtimeWords`). */
  private awaitingWords: { since: number; timer: unknown } | undefined;
  private awaitingFinal: unknown;
  private settleFinal: (() => void) | undefined;
  private discardUtterance = false;
  private lastSpeechAt = 0;
  private firstUtteranceMs = 0;
  private firstUtteranceDone = false;
  private dtmfDigits = '';
  private dtmfTimer: unknown;
  /** Words the caller said over the agent without interrupting; they become a turn when it stops. */
  private heldTurn = '';

  constructor(
    private readonly spec: CallSpec,
    private readonly clock: Clock,
    private readonly hooks: HearingHooks,
  ) {
    this.denoiser = spec.noiseCancellation ? new NoiseSuppressor() : undefined;
    this.vad = spec.vad?.open(spec.callId) ?? new EnergyVad();
  }

  /** Opens the transcriber (pipeline), once; early, while the phone rings, so the first turn pays no connect time. */
  open(): void {
    if (this.stt || !this.spec.stt) return;
    this.stt = this.spec.stt.open({
      callId: this.spec.callId,
      languages: this.spec.languages.map((l) => l.code),
      onTranscript: (transcript) => {
        this.wordless = transcript.wordless === true;
        if (transcript.final) {
          if (transcript.text.trim()) this.finals.push(transcript.text.trim());
          this.interim = '';
          if (transcript.language) this.hooks.languageDetected(transcript.language);
          if (this.awaitingFinal !== undefined) {
            this.clock.clearTimeout(this.awaitingFinal);
            this.settleFinal?.();
            return;
          }
        } else this.interim = transcript.text;
        // Words over the agent (or over its held speech) may settle an interruption at once.
        if ((this.speaking && this.hooks.agentAudible()) || this.hooks.agentPaused()) this.checkBargeIn();
      },
      onError: (error) => this.hooks.failed('transcriber', error),
    });
  }

  /** One 20 ms frame of the caller, while the call is in progress. */
  hear(input: Int16Array): void {
    const frame = this.denoiser ? this.denoiser.process(input) : input;
    const speech = this.vad.process(frame);
    if (this.spec.mode === 'pipeline') this.stt?.write(frame, speech);
    else this.hooks.realtimeAudio(frame);
    this.detect(speech, this.vad.loud);
  }

  /**
   * Turn-taking on one classified frame. The end-of-turn silence counts from the caller's last loud
   * frame, not from where the VAD's hangover (the dips between words it spans) ends, so a turn ends
   * `endpoint_sensitivity` after the caller stopped, as configured, and not a hangover later.
   */
  private detect(speech: boolean, loud: boolean): void {
    const now = this.clock.now();
    this.framesSinceLoud = speech && loud ? 0 : this.framesSinceLoud + 1;
    if (speech) {
      if (!this.speaking) {
        this.speaking = true;
        this.hooks.speechStarted();
      }
      if (loud) this.lastSpeechAt = now;
      this.silenceMs = 0;
      // A short dip inside the utterance (a stop consonant, a comma) counts toward the interruption.
      if (this.turnActive && this.pauseMs <= BARGE_BRIDGE_MS) this.bargeMs += this.pauseMs;
      this.pauseMs = 0;
      if (!this.turnActive) {
        this.turnActive = true;
        this.discardUtterance = false;
        this.utteranceMs = 0;
        // Speech over the agent counts over the whole utterance: "wait, stop, ..." pauses between words.
        this.bargeMs = 0;
      }
      this.utteranceMs += FRAME_MS;
      if (!this.firstUtteranceDone) this.firstUtteranceMs += FRAME_MS;
      if (this.hooks.agentAudible() || this.hooks.agentState() === 'thinking') this.considerBargeIn();
      return;
    }
    if (this.speaking) {
      this.speaking = false;
      this.hooks.speechStopped();
    }
    if (!this.turnActive) return;
    this.silenceMs = this.framesSinceLoud * FRAME_MS;
    this.pauseMs += FRAME_MS;
    if (!this.firstUtteranceDone && this.pauseMs >= FIRST_UTTERANCE_PAUSE_MS) this.classifyAnswerer();
    if (this.spec.mode !== 'pipeline') return;
    // The transcript is only looked at once the shortest possible end-of-turn silence has passed.
    if (this.silenceMs < MIN_ENDPOINT_MS || this.awaitingFinal !== undefined) return;
    const delay = endpointDelayMs(this.spec.endpointSensitivity, this.spec.endpointType, this.spec.endpointType === 'ai' ? this.turnText() : '');
    if (this.silenceMs >= delay) this.endTurn(delay);
  }

  private considerBargeIn(): void {
    this.bargeMs += FRAME_MS;
    this.checkBargeIn();
  }

  /**
   * The caller's sound over the agent: after `interrupt_sensitivity` of it the agent pauses; the
   * interruption stands once the words take the turn, or after `WORDLESS_INTERRUPTION_MS` of speech
   * without any; otherwise the utterance's end decides (`resolvePause`): in a pipeline call its end
   * of turn, in a realtime call the model's transcript of it (`realtimeWords`).
   */
  private checkBargeIn(): void {
    if (this.hooks.agentState() === 'thinking') return;
    if (!this.spec.allowInterruptions) return;
    const paused = this.hooks.agentPaused();
    if (!paused && this.bargeMs < interruptDelayMs(this.spec.interruptSensitivity)) return;
    const words = this.spokenWords();
    if (takesTurn(words, this.spec.minInterruptWords)) return this.interruptNow();
    if (words && isBackchannel(words)) this.discardUtterance = true;
    else if (!paused) this.hooks.pause();
    else if (words === '' && this.utteranceMs >= WORDLESS_INTERRUPTION_MS) this.interruptNow();
  }

  private interruptNow(): void {
    this.discardUtterance = false;
    this.hooks.interrupt();
  }

  /**
   * The utterance that paused the agent has settled (`words`, '' when the transcriber gave none):
   * the interruption stands if they take the turn, else the agent resumes.
   */
  private resolvePause(words: string): void {
    if (takesTurn(words, this.spec.minInterruptWords)) this.interruptNow();
    else this.hooks.resume();
  }

  private turnText(): string {
    return [...this.finals, this.interim].filter(Boolean).join(' ');
  }

  /** The caller's words so far, for turn-taking: none when the transcripts only stand for speech. */
  private spokenWords(): string {
    return this.wordless ? '' : this.turnText();
  }

  /** The caller's turn is over (`silence` ms of it): its words settle once the final transcript is in (or after a wait). */
  private endTurn(silence: number): void {
    this.stt?.finalize();
    const settle = () => {
      this.awaitingFinal = undefined;
      const text = this.finals.join(' ').trim();
      const wordless = this.wordless;
      if (this.hooks.agentPaused()) this.resolvePause(wordless ? '' : text);
      const overAgent = this.hooks.agentAudible();
      // Sound over the agent that no words came of (a cough, a wordless transcriber's "mm") is no turn to hold.
      const discard = dropsAsBackchannel(text, this.discardUtterance, overAgent) || (overAgent && wordless);
      this.finals = [];
      this.interim = '';
      this.wordless = false;
      this.turnActive = false;
      this.silenceMs = 0;
      this.pauseMs = 0;
      this.discardUtterance = false;
      if (discard || text === '') return;
      if (overAgent) this.heldTurn = this.heldTurn ? `${this.heldTurn} ${text}` : text;
      else this.hooks.turn(text, { since: this.lastSpeechAt, silence });
    };
    if (this.finals.length > 0 && this.interim === '') return settle();
    this.awaitingFinal = this.clock.setTimeout(settle, this.spec.stt?.finalWaitMs ?? FINAL_TRANSCRIPT_WAIT_MS);
    this.settleFinal = settle;
  }

  /**
   * A realtime model's server VAD ended the caller's turn (multimodal, dualplex): the turn state is
   * reset; returns whether the turn counts (not a backchannel, not said over the agent) and, if it
   * does, when the caller was last heard.
   */
  realtimeTurnEnded(): { since: number } | undefined {
    if (this.hooks.agentPaused() && this.awaitingWords === undefined) {
      // The utterance paused the agent: the model's transcript of it decides, or a wait without one.
      const timer = this.clock.setTimeout(() => {
        this.awaitingWords = undefined;
        this.resolvePause('');
      }, REALTIME_WORDS_WAIT_MS);
      this.awaitingWords = { since: this.lastSpeechAt, timer };
    }
    const ignore = this.discardUtterance || this.hooks.agentAudible();
    this.turnActive = false;
    this.silenceMs = 0;
    this.pauseMs = 0;
    this.discardUtterance = false;
    return ignore ? undefined : { since: this.lastSpeechAt };
  }

  /**
   * A realtime model's transcript of the caller's utterance. When that utterance paused the agent,
   * its words decide: they take the turn (the interruption stands, and the turn is returned with
   * when the caller was last heard) or the agent resumes (undefined).
   */
  realtimeWords(text: string): { since: number } | undefined {
    const waiting = this.awaitingWords;
    if (!waiting) return undefined;
    this.clock.clearTimeout(waiting.timer);
    this.awaitingWords = undefined;
    if (!this.hooks.agentPaused()) return undefined;
    this.resolvePause(text);
    return this.hooks.agentPaused() || this.hooks.agentAudible() ? undefined : { since: waiting.since };
  }

  /** Whether a realtime call's utterance is waiting for its words to decide a pause. */
  get decidingPause(): boolean {
    return this.awaitingWords !== undefined;
  }

  private classifyAnswerer(): void {
    this.firstUtteranceDone = true;
    if (this.spec.type !== 'outbound' || this.spec.answeredBy !== null) return;
    this.hooks.answered(this.firstUtteranceMs >= MACHINE_GREETING_MS ? 'machine' : 'human');
  }

  /** A keypad key from the caller; keys are collected until a short pause, then reach the model as text. */
  dtmf(digit: string): void {
    if (!/^[0-9*#A-D]$/i.test(digit)) return;
    this.dtmfDigits += digit;
    if (this.dtmfTimer !== undefined) this.clock.clearTimeout(this.dtmfTimer);
    this.dtmfTimer = this.clock.setTimeout(() => {
      this.dtmfTimer = undefined;
      const digits = this.dtmfDigits;
      this.dtmfDigits = '';
      this.hooks.turn(`[The caller pressed the keys ${digits}]`);
    }, DTMF_WAIT_MS);
  }

  /** Words held while the agent spoke, now that it listens (taken once). */
  takeHeldTurn(): string {
    const text = this.heldTurn;
    this.heldTurn = '';
    return text;
  }

  /**
   * Words the caller said that never became a turn (a hang-up right after them, or said over the
   * agent), unless they were only a backchannel ("mm-hmm"), which turns drop too.
   */
  unanswered(): string {
    const text = [this.heldTurn, this.turnText()].filter(Boolean).join(' ').trim();
    return text && !isBackchannel(text) ? text : '';
  }

  /** The call ended: timers stop and the transcriber closes. */
  close(): void {
    if (this.dtmfTimer !== undefined) this.clock.clearTimeout(this.dtmfTimer);
    if (this.awaitingFinal !== undefined) this.clock.clearTimeout(this.awaitingFinal);
    if (this.awaitingWords) this.clock.clearTimeout(this.awaitingWords.timer);
    this.stt?.close();
    this.vad.close();
  }
}
