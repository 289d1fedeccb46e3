import { createActor, fromCallback, type ActorRefFrom, type SnapshotFrom } from 'xstate';
import type { Clock } from '../clock.js';
import { parseArguments, runFunction, type FunctionContext } from '../agent/functions.js';
import { knowledgeSection } from '../agent/knowledge.js';
import { MAX_TOOL_ROUNDS, streamRound, type ModelChoice } from '../agent/round.js';
import type { ChatMessage, FunctionDefinition, ToolCall } from '../llm/types.js';
import type { Logger } from '../logger.js';
import { ambientBed, dtmfTone, type AmbientSound } from './audio.js';
import { Hearing } from './hearing/hearing.js';
import type { Builtin, BuiltinEffect } from './speaking/builtins.js';
import { callMachine, type CallEvent, type EndedStatus, type ResponseOutcome, type ResponseRequest } from './machine.js';
import { Playout, heardText, type Segment } from './speaking/playout.js';
import { SAY_EXACTLY, type RealtimeEvent, type RealtimeProvider, type RealtimeSession, type SttProvider, type TtsProvider } from './providers/types.js';
import { filler as fillerPhrase, type FillerKind } from './speaking/fillers.js';
import { SpeechQueue } from './speaking/speechQueue.js';
import { SentenceChunker } from './speaking/sentences.js';
import { endpointDelayMs } from './hearing/turns.js';

/**
 * One live call: the actor, the caller's audio in, the agent's audio out, and the engine of the
 * assistant's mode in between.
 *
 * - `pipeline`: VAD and the transcriber find the end of the caller's turn; the text model answers
 *   (with the conversations' tool loop); sentences are spoken by the TTS as they complete.
 * - `multimodal`: a realtime speech-to-speech session hears the caller and speaks; this side still
 *   runs the VAD for barge-in and timers, and the actor decides when a response is asked for.
 * - `dualplex`: the realtime session answers in text, spoken by the assistant's TTS voice.
 *
 * The transcript keeps only what the caller heard: an interrupted answer is cut to the frames that
 * went out, and the model's history gets the same cut.
 */

export type CallMode = 'pipeline' | 'multimodal' | 'dualplex';

/** The one audio interface every transport speaks: PCM16 16 kHz frames in and out. */
export interface CallTransport {
  sendAudio(frame: Int16Array): void;
  /** Asks the far end to echo `name` when everything sent so far has been played. */
  sendMark(name: string): void;
  /** Discards audio the far end has buffered but not played. */
  clear(): void;
  /** Ends the media connection. */
  close(): void;
}

export interface TranscriptEntry {
  readonly role: 'assistant' | 'user';
  text: string;
}

export interface CallSpec {
  readonly callId: number;
  readonly ownerId: number;
  readonly type: 'inbound' | 'outbound' | 'web';
  readonly mode: CallMode;
  readonly systemPrompt: string;
  readonly greeting: string | null;
  readonly waitForCustomer: boolean;
  readonly timers: { ringingMs: number; maxDurationMs: number; maxSilenceMs: number; initialSilenceMs: number | null; reengageMs: number };
  readonly reengagementPrompt: string | null;
  readonly voiceMailMessage: string | null;
  readonly endCallOnVoicemail: boolean;
  readonly allowInterruptions: boolean;
  readonly interruptSensitivity: number;
  readonly minInterruptWords: number | null;
  readonly endpointType: 'vad' | 'ai';
  readonly endpointSensitivity: number;
  readonly fillers: boolean;
  readonly temperature: number;
  readonly ambient: { sound: AmbientSound; volume: number } | null;
  /** `enable_noise_cancellation`: caller audio is cleaned before the VAD and the transcriber. */
  readonly noiseCancellation: boolean;
  /** Languages by ISO code, the primary first, with a voice of the assistant's provider in each. */
  readonly languages: ReadonlyArray<{ code: string; name: string; voice: string }>;
  readonly voiceSettings: { speed: number; stability: number; similarity: number; emotion: boolean };
  readonly llm: ModelChoice;
  readonly fallback: ModelChoice | undefined;
  /** Multimodal and dualplex: `chat_llm_fallback_id`, which handles tool calls when the realtime model's function calling fails or times out. */
  readonly toolFallback: ModelChoice | undefined;
  readonly stt: SttProvider | undefined;
  readonly tts: TtsProvider | undefined;
  readonly realtime: { provider: RealtimeProvider; model: string; voice: string; threshold: number | null } | undefined;
  readonly functions: readonly FunctionDefinition[];
  readonly functionContext: FunctionContext;
  /** `knowledgebase_mode: prompt` (pipeline): passages for each caller turn go into that turn's system prompt. */
  readonly promptKnowledgebaseId?: number;
  /** The assistant's built-in tools, made once per call (the calendar caches its owner). */
  readonly builtins: readonly Builtin[];
  /** The carrier said who answered (`AnsweredBy`), when it knows. */
  answeredBy: 'human' | 'machine' | 'unknown' | null;
}

export interface CallEnd {
  readonly status: string;
  readonly failure: string | undefined;
  readonly transcript: string;
  readonly answeredAt: number | null;
  readonly endedAt: number;
  readonly durationSeconds: number;
  readonly answeredBy: 'human' | 'machine' | 'unknown' | null;
}

export interface SessionHooks {
  /** Every status the call enters, in order. */
  status(status: string, at: number): void;
  /** The call ended; called once. */
  ended(end: CallEnd): void;
  /** Transfer the live call to a number (the carrier redirects it). */
  transfer(number: string): Promise<void>;
  /** Milliseconds from the caller's last speech frame to the agent's first audio frame, less the end-of-turn silence. */
  voiceToVoice?(ms: number): void;
  turn?(): void;
  interruption?(): void;
  /** Every frame the agent sent (speech, ambient or both), for the recording. */
  agentFrame?(frame: Int16Array): void;
  /** How late (ms) a frame of the agent's speech left against its 20 ms schedule. */
  frameLateness?(ms: number): void;
  /** Time to the first token of the text model, per round. */
  firstByte?(kind: 'llm', provider: string, ms: number): void;
}

const STATUS_NAMES = new Set(['initiated', 'ringing', 'busy', 'in-progress', 'no-answer', 'failed', 'completed', 'ended_by_customer', 'ended_by_assistant', 'ended']);
const DEFAULT_REENGAGEMENT = 'The caller has been silent for a while. In one short sentence, check whether they are still there.';
const GOODBYES: Record<string, string> = {
  max_duration: 'The call has reached its time limit. Say a short, friendly goodbye.',
  balance: 'The call has to end now. Say a short, friendly goodbye.',
  voicemail: 'Say a short goodbye.',
  initial_silence: 'Nobody has answered. Say a short goodbye.',
  shutdown: 'The call has to end now for a short service break. Say a short, friendly goodbye and invite them to call again in a few minutes.',
};
/** Silence before a filler: the model's first words, or a function's result, taking longer than this. */
const FILLER_DELAY_MS = 800;
/** A realtime response that shows no progress (started, audio, text, a function call) for this long is taken to have failed. */
const REALTIME_RESPONSE_TIMEOUT_MS = 10_000;

export class CallSession {
  readonly actor: ActorRefFrom<typeof callMachine>;
  readonly transcript: TranscriptEntry[] = [];
  private transport: CallTransport | undefined;
  private playout: Playout | undefined;
  private readonly hearing: Hearing;
  private realtime: RealtimeSession | undefined;
  private readonly history: ChatMessage[];
  private status = 'initiated';
  private agent = '';
  private answeredAt: number | null = null;
  private ended = false;
  private language: { code: string; name: string; voice: string };

  /** The caller's last turn, for the voice-to-voice latency of the answer to it. */
  private probe: { since: number; silence: number } | undefined;

  // The response being spoken
  private drainWaiter: (() => void) | undefined;
  private current: { segments: Segment[]; entry: TranscriptEntry | undefined; realtimeItem?: string; realtimeMs: number } | undefined;

  constructor(
    readonly spec: CallSpec,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly hooks: SessionHooks,
  ) {
    this.language = spec.languages[0]!;
    this.history = [{ role: 'system', content: spec.systemPrompt }];
    this.hearing = new Hearing(spec, clock, {
      agentState: () => this.agent,
      agentAudible: () => this.agentAudible(),
      speechStarted: () => this.send({ type: 'SPEECH_START' }),
      speechStopped: () => this.send({ type: 'SPEECH_STOP' }),
      turn: (text, heard) => {
        // Keys pressed in a realtime call reach the realtime model too (its speech turns come from it).
        if (!heard && this.spec.mode !== 'pipeline') this.realtime?.addMessage('user', text);
        this.userSaid(text, heard);
      },
      interrupt: () => this.interrupt(),
      answered: (by) => this.answeredBy(by),
      languageDetected: (code) => this.switchLanguage(code),
      realtimeAudio: (frame) => this.realtime?.appendAudio(frame),
      failed: (kind, error) => this.providerFailed(kind, error),
    });
    const machine = callMachine.provide({
      actors: {
        respond: fromCallback<{ type: string }, ResponseRequest>(({ input, sendBack }) => {
          const abort = new AbortController();
          this.respond(input, abort.signal, (event) => {
            if (!abort.signal.aborted) sendBack(event);
          }).catch((error: unknown) => {
            if (abort.signal.aborted) return;
            this.logger.warn({ err: error, callId: spec.callId }, 'response failed');
            sendBack({ type: 'RESPONSE_FAILED', reason: error instanceof Error ? error.message : 'The response failed' });
          });
          return () => {
            abort.abort();
            this.finishResponse(true);
          };
        }),
      },
    });
    this.actor = createActor(machine, {
      clock: clock as never,
      input: { timers: spec.timers, greeting: spec.greeting, waitForCustomer: spec.waitForCustomer },
    });
    this.actor.subscribe({
      next: (snapshot) => this.observe(snapshot),
      error: (error) => {
        this.logger.error({ err: error, callId: spec.callId }, 'call actor failed');
        this.finish('failed', 'The call failed unexpectedly');
      },
    });
    this.actor.start();
  }

  send(event: CallEvent): void {
    if (!this.ended) this.actor.send(event);
  }

  /** Opens provider connections early (while the phone rings), so the first turn pays no connect time. */
  warmUp(): void {
    if (this.spec.mode === 'pipeline') this.hearing.open();
    else this.openRealtime();
  }

  /** The media connection is up: the call is answered. */
  attach(transport: CallTransport): void {
    if (this.ended) {
      transport.close();
      return;
    }
    this.transport = transport;
    const ambient = this.spec.ambient ? { bed: ambientBed(this.spec.ambient.sound), gain: this.spec.ambient.volume } : undefined;
    this.playout = new Playout(
      { audio: (frame) => transport.sendAudio(frame), mark: (name) => transport.sendMark(name), clear: () => transport.clear() },
      this.clock,
      ambient,
    );
    this.playout.onFrame = this.hooks.agentFrame;
    this.playout.onLateness = this.hooks.frameLateness;
    this.playout.onDrained = () => {
      const waiter = this.drainWaiter;
      this.drainWaiter = undefined;
      waiter?.();
    };
    this.playout.onSpeechFrame = () => {
      if (this.probe) {
        const latency = this.clock.now() - this.probe.since - this.probe.silence;
        this.probe = undefined;
        this.hooks.voiceToVoice?.(Math.max(0, latency));
      }
    };
    this.warmUp();
    this.send({ type: 'ANSWERED' });
  }

  /** The call ticker (every 5 ms, `now` by the clock): paces the agent's audio. */
  tick(now: number): void {
    this.playout?.tick(now);
  }

  /** Echo of a mark from the far end. */
  mark(name: string): void {
    this.playout?.acknowledge(name);
  }

  // ---------------------------------------------------------------- caller audio

  audio(input: Int16Array): void {
    if (this.status === 'in-progress') this.hearing.hear(input);
  }

  private agentAudible(): boolean {
    return (this.agent === 'speaking' || this.agent === 'away') && this.playout !== undefined && this.playout.busy;
  }

  private interrupt(): void {
    this.hooks.interruption?.();
    this.finishResponse(true);
    this.send({ type: 'INTERRUPT' });
  }

  /** The caller's turn, in words; `heard` when it was spoken (not keys, not words held over the agent). */
  private userSaid(text: string, heard?: { since: number; silence: number }): void {
    this.transcript.push({ role: 'user', text });
    this.probe = heard;
    this.hooks.turn?.();
    this.send({ type: 'TURN', text });
  }

  /** Who answered: the carrier's answering-machine detection, or the first utterance's length. */
  answeredBy(value: 'human' | 'machine' | 'unknown'): void {
    this.spec.answeredBy = value;
    if (value === 'machine') this.voicemail();
  }

  /**
   * An answering machine: a `voice_mail_message` is left after its greeting, then the call ends;
   * without one the call ends at once (`end_call_on_voicemail`, the default) or carries on.
   */
  private voicemail(): void {
    if (this.spec.voiceMailMessage) this.send({ type: 'VOICEMAIL', hangUp: false, message: this.spec.voiceMailMessage });
    else if (this.spec.endCallOnVoicemail) this.send({ type: 'VOICEMAIL', hangUp: true, message: null });
  }

  /** A keypad key from the caller; keys are collected until a short pause, then reach the model as text. */
  dtmf(digit: string): void {
    if (this.status === 'in-progress') this.hearing.dtmf(digit);
  }

  // ---------------------------------------------------------------- providers

  /** An instruction for one response (a goodbye, a re-engagement), in English, said in the call's current language. */
  private inLanguage(instruction: string): string {
    return `${instruction} Speak ${this.language.name}.`;
  }

  private switchLanguage(code: string): void {
    if (code === this.language.code) return;
    const next = this.spec.languages.find((l) => l.code === code);
    if (!next) return;
    this.language = next;
    this.history.push({ role: 'system', content: `The caller now speaks ${next.name}. Answer in ${next.name}.` });
  }

  private openRealtime(): void {
    if (this.realtime || !this.spec.realtime) return;
    const { provider, model, voice, threshold } = this.spec.realtime;
    this.realtime = provider.connect({
      callId: this.spec.callId,
      model,
      instructions: this.spec.systemPrompt,
      voice,
      tools: this.spec.functions,
      temperature: this.spec.temperature,
      turnDetectionThreshold: threshold,
      silenceMs: endpointDelayMs(this.spec.endpointSensitivity, 'vad', ''),
      endpointType: this.spec.endpointType,
      output: this.spec.mode === 'dualplex' ? 'text' : 'audio',
      speed: this.spec.voiceSettings.speed,
      onEvent: (event) => this.realtimeEvent(event),
    });
  }

  private realtimeListener: ((event: RealtimeEvent) => void) | undefined;
  /** Responses asked of the realtime session so far; each ask's number is its tag. */
  private realtimeAsks = 0;
  private pendingUserEntry: TranscriptEntry | undefined;

  private realtimeEvent(event: RealtimeEvent): void {
    if (this.ended) return;
    switch (event.type) {
      case 'speech_stopped': {
        const heard = this.hearing.realtimeTurnEnded();
        if (!heard) return;
        const entry: TranscriptEntry = { role: 'user', text: '' };
        this.transcript.push(entry);
        this.pendingUserEntry = entry;
        this.probe = { since: heard.since, silence: endpointDelayMs(this.spec.endpointSensitivity, 'vad', '') };
        this.hooks.turn?.();
        this.send({ type: 'TURN', text: '' });
        return;
      }
      case 'user_transcript':
        if (this.pendingUserEntry && this.pendingUserEntry.text === '') this.pendingUserEntry.text = event.text;
        else this.transcript.push({ role: 'user', text: event.text });
        this.pendingUserEntry = undefined;
        this.prune();
        return;
      case 'error':
        if (event.fatal) this.providerFailed('realtime model', new Error(event.message));
        else this.logger.warn({ callId: this.spec.callId, message: event.message }, 'realtime model error');
        return;
      default:
        this.realtimeListener?.(event);
    }
  }

  /** Drops user entries whose words never arrived. */
  private prune(): void {
    for (let i = this.transcript.length - 1; i >= 0; i--) if (this.transcript[i]!.text === '' && this.transcript[i] !== this.pendingUserEntry) this.transcript.splice(i, 1);
  }

  private providerFailed(kind: string, error: Error): void {
    if (this.ended) return;
    this.logger.warn({ err: error, callId: this.spec.callId }, `${kind} failed`);
    this.send({ type: 'FAIL', reason: `The ${kind} failed: ${error.message}` });
  }

  // ---------------------------------------------------------------- responses

  private async respond(request: ResponseRequest, signal: AbortSignal, sendBack: (event: CallEvent) => void): Promise<void> {
    this.current = { segments: [], entry: undefined, realtimeMs: 0 };
    let audioStarted = false;
    const started = () => {
      if (audioStarted) return;
      audioStarted = true;
      sendBack({ type: 'RESPONSE_AUDIO' });
    };
    let outcome: ResponseOutcome & { transfer?: string };
    const fixedText = request.kind === 'greeting' || request.kind === 'voicemail';
    if (this.spec.mode === 'pipeline' || (this.spec.mode === 'dualplex' && fixedText)) {
      outcome = await this.respondWithTts(request, signal, started);
    } else {
      outcome = await this.respondRealtime(request, signal, started);
    }
    if (signal.aborted) return;
    await this.drained(signal);
    if (signal.aborted) return;
    this.finishResponse(false);
    if (outcome.transfer) {
      await this.hooks.transfer(outcome.transfer).catch((error: unknown) => this.logger.warn({ err: error, callId: this.spec.callId }, 'transfer failed'));
      sendBack({ type: 'RESPONSE_DONE', outcome: { end: 'completed' } });
      return;
    }
    sendBack({ type: 'RESPONSE_DONE', outcome: request.kind === 'goodbye' || request.kind === 'voicemail' ? { end: 'ended_by_assistant' } : outcome });
  }

  private drained(signal: AbortSignal): Promise<void> {
    if (!this.playout?.busy) return Promise.resolve();
    return new Promise((resolve) => {
      this.drainWaiter = resolve;
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  /** Writes the response's transcript entry and history with what the caller heard; `cut` also clears the audio. */
  private finishResponse(cut: boolean): void {
    const current = this.current;
    if (!current) return;
    this.current = undefined;
    let heard: string;
    if (cut && this.playout) {
      const cleared = new Map(this.playout.clear().map((c) => [c.segment.id, c]));
      heard = current.segments.map((s) => cleared.get(s.id)?.heard ?? heardText(s)).filter(Boolean).join(' ');
      if (current.realtimeItem) this.realtime?.truncate(current.realtimeItem, current.segments.reduce((ms, s) => ms + (cleared.get(s.id)?.heardMs ?? s.sent * 20), 0));
      if (this.spec.mode !== 'pipeline') this.realtime?.cancelResponse();
    } else heard = current.segments.map((s) => (cut ? heardText(s) : s.text)).filter(Boolean).join(' ');
    if (heard) {
      this.transcript.push({ role: 'assistant', text: heard });
      if (this.spec.mode === 'pipeline') this.history.push({ role: 'assistant', content: heard });
    }
  }

  private speakSegment(text: string, signal: AbortSignal, started: () => void): Promise<void> {
    const playout = this.playout;
    const tts = this.spec.tts;
    if (!playout || !tts || signal.aborted) return Promise.resolve();
    const segment = playout.begin(text);
    this.current?.segments.push(segment);
    return (async () => {
      const settings = this.spec.voiceSettings;
      for await (const chunk of tts.synthesize({ text, voice: this.language.voice, language: this.language.code, speed: settings.speed, stability: settings.stability, similarity: settings.similarity, emotion: settings.emotion, signal })) {
        if (signal.aborted) return;
        if (chunk.length > 0) {
          started();
          playout.push(segment, chunk);
        }
      }
      playout.finish(segment);
    })();
  }

  /** Plays keypad tones into the call (IVR navigation); not part of the transcript. */
  private playTones(digits: string, started: () => void): void {
    const playout = this.playout;
    if (!playout) return;
    const segment = playout.begin('');
    for (const key of digits) playout.push(segment, dtmfTone(key));
    started();
    playout.finish(segment);
  }

  private async respondWithTts(request: ResponseRequest, signal: AbortSignal, started: () => void): Promise<ResponseOutcome & { transfer?: string }> {
    if (request.kind === 'greeting' || request.kind === 'voicemail') {
      // What was said joins the history once, as heard, when the response finishes (finishResponse).
      if (request.kind === 'greeting' && request.after) this.history.push({ role: 'user', content: request.after });
      if (this.spec.mode !== 'pipeline') this.realtime?.addMessage('assistant', request.text);
      await this.speakSegment(request.text, signal, started);
      return {};
    }
    const messages = [...this.history];
    let functions = this.spec.functions;
    if (request.kind === 'turn') {
      this.history.push({ role: 'user', content: request.text });
      messages.push({ role: 'user', content: request.text });
      const knowledge = await this.knowledgeFor(request.text);
      if (knowledge && messages[0]?.role === 'system') messages[0] = { role: 'system', content: `${messages[0].content}\n\n${knowledge}` };
    } else {
      functions = [];
      messages.push({ role: 'system', content: this.inLanguage(request.kind === 'reengage' ? this.spec.reengagementPrompt ?? DEFAULT_REENGAGEMENT : GOODBYES[request.reason]!) });
    }
    return this.modelLoop(messages, functions, signal, started, request.kind === 'turn' ? request.text : '', request.kind === 'turn');
  }

  /** The passages of the prompt-mode knowledgebase that best answer `text`, as the system prompt carries them; '' without. */
  private async knowledgeFor(text: string): Promise<string> {
    const kbId = this.spec.promptKnowledgebaseId;
    if (kbId === undefined) return '';
    const { knowledge, ownerId } = this.spec.functionContext;
    const passages = await knowledge.search(ownerId, kbId, text, 3).catch((error: unknown) => {
      this.logger.warn({ err: error, callId: this.spec.callId }, 'knowledge for the turn could not be searched');
      return [];
    });
    return knowledgeSection(passages);
  }

  /** Text model rounds with tools; sentences are spoken as they complete. */
  /** `fillers`: whether silence may be filled (an answer to the caller; not a goodbye or a re-engagement). */
  private async modelLoop(messages: ChatMessage[], functions: readonly FunctionDefinition[], signal: AbortSignal, started: () => void, userText: string, fillers: boolean): Promise<ResponseOutcome & { transfer?: string }> {
    const effects: BuiltinEffect[] = [];
    const speech = new SpeechQueue();
    const say = (sentence: string) => speech.add(() => this.speakSegment(sentence, signal, started));
    // One filler at most per answer to the caller, after FILLER_DELAY_MS of silence: while the model
    // has not begun (or not resumed after a tool round), or while a function it called without a
    // word first runs. Anything the model has said by then makes it unneeded.
    let heardAnything = false;
    let fillerSaid = false;
    let filler: unknown;
    const fillIn = (kind: FillerKind) => {
      if (!fillers || !this.spec.fillers || fillerSaid || heardAnything) return;
      filler = this.clock.setTimeout(() => {
        filler = undefined;
        const phrase = fillerPhrase(this.language.code, kind, this.spec.callId);
        if (phrase === undefined || heardAnything || signal.aborted) return;
        fillerSaid = true;
        say(phrase);
      }, FILLER_DELAY_MS);
    };
    const stopFiller = () => {
      if (filler !== undefined) this.clock.clearTimeout(filler);
      filler = undefined;
    };
    // A tool round joins the call's history whole: the calls, then an answer to each (one cut off by
    // a barge-in or hang-up says so), at once when the response is aborted, so the next turn's
    // model never sees calls without their results. Words spoken around it join as heard.
    let toolRound: { calls: readonly ToolCall[]; results: Map<string, ChatMessage> } | undefined;
    const recordToolRound = () => {
      if (!toolRound) return;
      this.history.push({ role: 'assistant', content: null, toolCalls: toolRound.calls });
      for (const call of toolRound.calls) {
        this.history.push(toolRound.results.get(call.id) ?? { role: 'tool', content: JSON.stringify({ error: 'Not run: the call moved on before it could.' }), toolCallId: call.id });
      }
      toolRound = undefined;
    };
    signal.addEventListener('abort', recordToolRound, { once: true });
    try {
      for (let round = 0; !signal.aborted; round++) {
        // The model has not begun (or, after a tool round, not resumed) its answer.
        fillIn('wait');
        const chunker = new SentenceChunker();
        const asked = performance.now();
        let first = true;
        const result = await streamRound(
          {
            llm: this.spec.llm,
            fallback: this.spec.fallback,
            messages,
            functions: round >= MAX_TOOL_ROUNDS ? [] : functions,
            temperature: this.spec.temperature,
            signal,
            onDelta: (delta) => {
              if (first) this.hooks.firstByte?.('llm', this.spec.llm.provider.name, performance.now() - asked);
              first = false;
              heardAnything = true;
              for (const sentence of chunker.push(delta)) say(sentence);
            },
          },
          this.logger,
          { callId: this.spec.callId },
        );
        stopFiller();
        if (signal.aborted) break;
        for (const sentence of chunker.flush()) say(sentence);
        if (result.calls.length === 0) break;
        fillIn('tool');
        messages.push({ role: 'assistant', content: result.text || null, toolCalls: result.calls });
        toolRound = { calls: result.calls, results: new Map() };
        for (const call of result.calls) {
          // After a hang-up or barge-in no further tool runs (a booking, a transfer) on the turn's behalf.
          if (signal.aborted) break;
          const output = await this.runCall(call, effects, userText, started);
          const message: ChatMessage = { role: 'tool', content: JSON.stringify(output), toolCallId: call.id };
          messages.push(message);
          toolRound?.results.set(call.id, message);
        }
        stopFiller();
        recordToolRound();
      }
      await speech.done();
    } finally {
      stopFiller();
      signal.removeEventListener('abort', recordToolRound);
    }
    return outcomeOf(effects);
  }

  private async runCall(call: ToolCall, effects: BuiltinEffect[], userText: string, started: () => void): Promise<unknown> {
    const args = parseArguments(call.arguments);
    const builtin = this.spec.builtins.find((b) => b.definition.name === call.name);
    if (builtin) {
      const { result, effect } = await builtin.run(args, { now: this.clock.now() });
      if (effect) {
        if (effect.type === 'dtmf') this.playTones(effect.digits, started);
        effects.push(effect);
      }
      return result;
    }
    return runFunction(call.name, args, { ...this.spec.functionContext, fallbackQuery: userText });
  }

  private async respondRealtime(request: ResponseRequest, signal: AbortSignal, started: () => void): Promise<ResponseOutcome & { transfer?: string }> {
    const session = this.realtime;
    if (!session) throw new Error('The realtime model is not connected');
    const effects: BuiltinEffect[] = [];
    const instructions =
      request.kind === 'reengage'
        ? this.inLanguage(this.spec.reengagementPrompt ?? DEFAULT_REENGAGEMENT)
        : request.kind === 'goodbye'
          ? this.inLanguage(GOODBYES[request.reason]!)
          : request.kind === 'greeting' || request.kind === 'voicemail'
            ? `${SAY_EXACTLY}"${request.text}"`
            : undefined;
    const speech = new SpeechQueue();
    let rounds = 0;
    await new Promise<void>((resolve, reject) => {
      let segment: Segment | undefined;
      let spokenText = '';
      let chunker = new SentenceChunker();
      let pendingCalls: { callId: string; name: string; arguments: string }[] = [];
      // The response this turn follows: asked for and not yet started, or started with this id.
      // Events of any other (one cancelled after a stall, its late `done`) are not this turn's.
      let awaiting = false;
      let responseId: string | undefined;
      let timer: unknown;
      /** Arms, or re-arms, the stall timer: the response must show progress every REALTIME_RESPONSE_TIMEOUT_MS. */
      const progress = () => {
        if (timer !== undefined) this.clock.clearTimeout(timer);
        timer = this.clock.setTimeout(() => {
          timer = undefined;
          session.cancelResponse();
          failed('The realtime model did not answer in time');
        }, REALTIME_RESPONSE_TIMEOUT_MS);
      };
      const stopTimer = () => {
        if (timer !== undefined) this.clock.clearTimeout(timer);
        timer = undefined;
      };
      let tag = '';
      const ask = (text?: string) => {
        awaiting = true;
        responseId = undefined;
        tag = String(++this.realtimeAsks);
        progress();
        session.createResponse(text, tag);
      };
      const done = () => {
        stopTimer();
        this.realtimeListener = undefined;
        resolve();
      };
      /** The realtime model's answer or its function calling failed: the text model takes the tool round. */
      const failed = (reason: string) => {
        stopTimer();
        awaiting = false;
        responseId = undefined;
        if (segment) this.playout?.finish(segment);
        segment = undefined;
        pendingCalls = [];
        const fallback = this.spec.toolFallback;
        if (!fallback || rounds >= MAX_TOOL_ROUNDS || signal.aborted) {
          this.realtimeListener = undefined;
          return reject(new Error(reason));
        }
        rounds++;
        this.logger.warn({ callId: this.spec.callId, reason }, 'realtime function calling failed; the text model takes over');
        void this.toolRoundWithTextModel(fallback, effects, started, signal).then((said) => {
          if (signal.aborted) return;
          if (said.results.length > 0) {
            for (const result of said.results) session.addMessage('user', `[The ${result.name} tool returned: ${JSON.stringify(result.output)}]`);
            ask();
          } else ask(`${SAY_EXACTLY}"${said.text.replace(/"/g, "'")}"`);
        }, reject);
      };
      signal.addEventListener('abort', done, { once: true });
      this.realtimeListener = (event) => {
        if (signal.aborted) return;
        if (event.type === 'response_started') {
          // A vendor that echoes tags names the ask it answers; one that does not, the first start
          // after it. A late start of an earlier ask is stopped rather than left to talk.
          if (event.tag !== undefined && event.tag !== tag) return session.cancelResponse();
          if (!awaiting) return;
          awaiting = false;
          responseId = event.responseId;
          segment = undefined;
          spokenText = '';
          chunker = new SentenceChunker();
          return progress();
        }
        if (!('responseId' in event) || responseId === undefined || event.responseId !== responseId) return;
        progress();
        switch (event.type) {
          case 'audio': {
            if (!this.playout || !this.current) return;
            if (!segment) {
              segment = this.playout.begin(spokenText);
              this.current.segments.push(segment);
              this.current.realtimeItem = event.itemId;
            }
            started();
            this.playout.push(segment, event.samples);
            return;
          }
          case 'text':
            if (this.spec.mode === 'dualplex') for (const sentence of chunker.push(event.delta)) speech.add(() => this.speakSegment(sentence, signal, started));
            else {
              spokenText += event.delta;
              if (segment) segment.text = spokenText;
            }
            return;
          case 'function_call':
            pendingCalls.push({ callId: event.callId, name: event.name, arguments: event.arguments });
            return;
          case 'response_done': {
            stopTimer();
            responseId = undefined;
            if (segment) this.playout?.finish(segment);
            for (const sentence of chunker.flush()) speech.add(() => this.speakSegment(sentence, signal, started));
            const unreadable = pendingCalls.some((call) => !isJsonObject(call.arguments));
            if (event.status === 'failed' || unreadable) return failed(unreadable ? 'The realtime model wrote unreadable function arguments' : 'The realtime model could not answer');
            if (pendingCalls.length === 0 || rounds >= MAX_TOOL_ROUNDS) return done();
            rounds++;
            const calls = pendingCalls;
            pendingCalls = [];
            void (async () => {
              for (const call of calls) {
                const output = await this.runCall({ id: call.callId, name: call.name, arguments: call.arguments }, effects, '', started);
                session.sendFunctionResult(call.callId, output);
              }
              if (!signal.aborted) ask();
            })().catch(reject);
            return;
          }
        }
      };
      ask(instructions);
    });
    await speech.done();
    return outcomeOf(effects);
  }

  /** One text-model round over the transcript so far, with the tools; runs what it calls. */
  private async toolRoundWithTextModel(model: ModelChoice, effects: BuiltinEffect[], started: () => void, signal: AbortSignal): Promise<{ text: string; results: Array<{ name: string; output: unknown }> }> {
    const messages: ChatMessage[] = [{ role: 'system', content: this.spec.systemPrompt }, ...this.transcript.filter((e) => e.text).map((e): ChatMessage => ({ role: e.role, content: e.text }))];
    const round = await streamRound({ llm: model, fallback: undefined, messages, functions: this.spec.functions, temperature: this.spec.temperature, signal, onDelta: () => {} }, this.logger, { callId: this.spec.callId });
    const results = [];
    for (const call of round.calls) {
      if (signal.aborted) break;
      results.push({ name: call.name, output: await this.runCall(call, effects, '', started) });
    }
    return { text: round.text, results };
  }

  // ---------------------------------------------------------------- status

  private observe(snapshot: SnapshotFrom<typeof callMachine>): void {
    const value = snapshot.value;
    const top = typeof value === 'string' ? value : Object.keys(value)[0]!;
    if (typeof value === 'object' && top === 'in-progress') {
      const inner = (value as Record<string, string | Record<string, string>>)['in-progress']!;
      const name = typeof inner === 'string' ? inner : Object.keys(inner)[0]!;
      this.agent = name === 'responding' && typeof inner === 'object' ? String(inner.responding) : name;
    } else this.agent = '';
    if (this.agent === 'listening' && this.status === 'in-progress') {
      const held = this.hearing.takeHeldTurn();
      if (held) queueMicrotask(() => this.userSaid(held));
    }
    if (top !== this.status && STATUS_NAMES.has(top)) {
      this.status = top;
      if (top === 'in-progress') {
        this.answeredAt = this.clock.now();
        // The carrier said "machine" while the call was still ringing, when there was nothing to do yet.
        if (this.spec.answeredBy === 'machine') queueMicrotask(() => this.voicemail());
      }
      this.logger.info({ callId: this.spec.callId, userId: this.spec.ownerId, status: top }, 'call status');
      this.hooks.status(top, this.clock.now());
      if (snapshot.status === 'done') this.finish(top, snapshot.context.failure);
    }
  }

  /** The caller hung up / the socket dropped / the carrier reported the end. */
  private finish(status: string, failure: string | undefined): void {
    if (this.ended) return;
    this.ended = true;
    if (this.current) this.finishResponse(true);
    this.hearing.close();
    this.realtime?.close();
    this.playout?.close();
    this.transport?.close();
    this.actor.stop();
    const endedAt = this.clock.now();
    // Words the caller said that never became a turn (a hang-up right after them, or said over the agent).
    const unanswered = this.hearing.unanswered();
    if (unanswered) this.transcript.push({ role: 'user', text: unanswered });
    this.prune();
    this.hooks.ended({
      status,
      failure,
      transcript: this.transcript.filter((e) => e.text).map((e) => `${e.role}: ${e.text}`).join('\n'),
      answeredAt: this.answeredAt,
      endedAt,
      durationSeconds: this.answeredAt === null ? 0 : Math.round((endedAt - this.answeredAt) / 1000),
      answeredBy: this.spec.answeredBy ?? (this.answeredAt !== null && this.spec.type !== 'outbound' ? 'human' : this.answeredAt !== null ? 'unknown' : null),
    });
  }

  /** Ends the call from outside (server shutdown, assistant deleted): status `ended`. */
  end(status: EndedStatus = 'ended'): void {
    if (this.ended) return;
    if (this.status === 'in-progress') this.send({ type: 'END', status });
    else this.send({ type: 'FAIL', reason: 'The call was stopped' });
  }

  get live(): boolean {
    return !this.ended;
  }

  get currentStatus(): string {
    return this.status;
  }

  /** Clock time of the answer, or null before it. */
  get answeredTime(): number | null {
    return this.answeredAt;
  }

  get agentState(): string {
    return this.agent;
  }
}

function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text || '{}');
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

function outcomeOf(effects: readonly BuiltinEffect[]): ResponseOutcome & { transfer?: string } {
  const transfer = effects.find((e): e is Extract<BuiltinEffect, { type: 'transfer' }> => e.type === 'transfer');
  if (transfer) return { transfer: transfer.number };
  if (effects.some((e) => e.type === 'end_call')) return { end: 'ended_by_assistant' };
  return {};
}
