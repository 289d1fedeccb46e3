import { createActor, fromCallback, type ActorRefFrom, type SnapshotFrom } from 'xstate';
import type { Clock } from '../clock.js';
import type { ChatMessage } from '../llm/types.js';
import type { Logger } from '../logger.js';
import { Hearing } from './hearing/hearing.js';
import { endpointDelayMs } from './hearing/turns.js';
import { callMachine, type CallEvent, type EndedStatus, type ResponseRequest } from './machine.js';
import type { RealtimeEvent } from './providers/types.js';
import type { CallSpec, CallTransport, Language, SessionHooks, TranscriptEntry } from './spec.js';
import { respondWithModel } from './speaking/pipeline.js';
import { RealtimeVoice } from './speaking/realtime.js';
import type { Outcome, ResponseContext } from './speaking/response.js';
import { Speaker } from './speaking/speaker.js';

/**
 * One live call: the call machine (machine.ts) wired to the caller's side (`Hearing`), the agent's
 * voice (`Speaker`) and the responder of the assistant's mode (`respondWithModel`, `RealtimeVoice`),
 * over one transport. It owns the call's transcript and status, and nothing of either side's work.
 *
 * - `pipeline`: VAD and the transcriber find the end of the caller's turn; the text model answers
 *   (with the agent's tool rounds); sentences are spoken by the TTS as they complete.
 * - `multimodal`: a realtime speech-to-speech session hears the caller and speaks; this side still
 *   runs the VAD for barge-in and timers, and the actor decides when a response is asked for.
 * - `dualplex`: the realtime session answers in text, spoken by the assistant's TTS voice.
 *
 * The transcript keeps only what the caller heard: an interrupted answer is cut to the frames that
 * went out, and the model's history gets the same cut.
 */

const STATUS_NAMES = new Set(['initiated', 'ringing', 'busy', 'in-progress', 'no-answer', 'failed', 'completed', 'ended_by_customer', 'ended_by_assistant', 'ended']);

export class CallSession {
  readonly actor: ActorRefFrom<typeof callMachine>;
  readonly transcript: TranscriptEntry[] = [];
  private transport: CallTransport | undefined;
  private readonly hearing: Hearing;
  private readonly speaker: Speaker;
  private readonly realtime: RealtimeVoice;
  private readonly response: ResponseContext;
  private readonly history: ChatMessage[];
  private status = 'initiated';
  private agent = '';
  private answeredAt: number | null = null;
  private ended = false;
  private language: Language;
  /** The caller's last turn, for the voice-to-voice latency of the answer to it. */
  private probe: { since: number; silence: number } | undefined;
  /** The call is being handed to another number: its stream ending is the transfer's doing. */
  private transferring = false;
  /** A realtime call's caller turn whose words the model has not transcribed yet. */
  private pendingUserEntry: TranscriptEntry | undefined;
  /** When the caller began the turn being heard (their first speech since the last turn), by the clock. */
  private turnStartedAt: number | undefined;
  /** When the caller's speech of the pending realtime turn began and ended. */
  private pendingSpan: { startedAt: number; endedAt: number } | undefined;
  /** When the response being spoken first went out as audio. */
  private responseAudioAt: number | undefined;
  /** Told to the far end as the media connection closes (where its protocol can say why). */
  private closeReason: string | undefined;

  /** @param logger bound to the call (its id, owner and request): lines here add only what they are about. */
  constructor(
    readonly spec: CallSpec,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly hooks: SessionHooks,
  ) {
    this.language = spec.languages[0]!;
    this.history = [{ role: 'system', content: spec.systemPrompt }];
    this.speaker = new Speaker(spec, clock);
    this.response = { spec, clock, logger, hooks, speaker: this.speaker, history: this.history, transcript: this.transcript, language: () => this.language };
    this.realtime = new RealtimeVoice(this.response, (event) => this.realtimeEvent(event));
    this.hearing = new Hearing(spec, clock, {
      agentState: () => this.agent,
      agentAudible: () => (this.agent === 'speaking' || this.agent === 'away') && this.speaker.busy,
      speechStarted: () => {
        this.turnStartedAt ??= this.clock.now();
        this.send({ type: 'SPEECH_START' });
      },
      speechStopped: () => this.send({ type: 'SPEECH_STOP' }),
      turn: (text, heard) => {
        // Keys pressed in a realtime call reach the realtime model too (its speech turns come from it).
        if (!heard && this.spec.mode !== 'pipeline') this.realtime.addMessage('user', text);
        this.userSaid(text, heard);
      },
      interrupt: () => this.interrupt(),
      pause: () => {
        this.speaker.pause();
        this.hooks.paused?.();
      },
      resume: () => {
        if (!this.speaker.paused) return;
        this.speaker.resume();
        this.hooks.resumed?.();
      },
      agentPaused: () => this.speaker.paused,
      answered: (by) => this.answeredBy(by),
      languageDetected: (code) => this.switchLanguage(code),
      realtimeAudio: (frame) => this.realtime.appendAudio(frame),
      failed: (kind, error) => this.providerFailed(kind, error),
    });
    this.actor = createActor(this.machine(), {
      clock: clock as never,
      input: { timers: spec.timers, greeting: spec.greeting, waitForCustomer: spec.waitForCustomer },
    });
    this.actor.subscribe({
      next: (snapshot) => this.observe(snapshot),
      error: (error) => {
        this.logger.error({ err: error }, 'call actor failed');
        this.finish('failed', 'The call failed unexpectedly');
      },
    });
    this.actor.start();
  }

  /** The call machine, whose `respond` actor is this call's responder: stopping it cuts the response. */
  private machine() {
    return callMachine.provide({
      actors: {
        respond: fromCallback<{ type: string }, ResponseRequest>(({ input, sendBack }) => {
          const abort = new AbortController();
          this.respond(input, abort.signal, (event) => {
            if (!abort.signal.aborted) sendBack(event);
          }).catch((error: unknown) => {
            if (abort.signal.aborted) return;
            this.logger.warn({ err: error }, 'response failed');
            sendBack({ type: 'RESPONSE_FAILED', reason: error instanceof Error ? error.message : 'The response failed' });
          });
          return () => {
            abort.abort();
            this.finishResponse(true);
          };
        }),
      },
    });
  }

  send(event: CallEvent): void {
    if (this.ended) return;
    // A transfer ends the stream at the carrier, perhaps before the carrier has answered the
    // transfer: that is the transfer done, not the caller hanging up.
    if (this.transferring && (event.type === 'CALLER_HUNG_UP' || event.type === 'CONNECTION_LOST')) this.actor.send({ type: 'CARRIER_COMPLETED' });
    else this.actor.send(event);
  }

  /** Opens provider connections early (while the phone rings), so the first turn pays no connect time. */
  warmUp(): void {
    if (this.spec.mode === 'pipeline') this.hearing.open();
    else this.realtime.open();
  }

  /** The media connection is up: the call is answered. */
  attach(transport: CallTransport): void {
    if (this.ended) {
      transport.close();
      return;
    }
    this.transport = transport;
    this.speaker.attach(transport, this.hooks, () => {
      if (!this.probe) return;
      const latency = this.clock.now() - this.probe.since - this.probe.silence;
      this.probe = undefined;
      this.hooks.voiceToVoice?.(Math.max(0, latency));
    });
    this.warmUp();
    this.send({ type: 'ANSWERED' });
  }

  /** The call ticker (every 5 ms, `now` by the clock): paces the agent's audio. */
  tick(now: number): void {
    this.speaker.tick(now);
  }

  /** Echo of a mark from the far end. */
  mark(name: string): void {
    this.speaker.acknowledge(name);
  }

  // ---------------------------------------------------------------- the caller

  audio(input: Int16Array): void {
    if (this.status === 'in-progress') this.hearing.hear(input);
  }

  /** A keypad key from the caller; keys are collected until a short pause, then reach the model as text. */
  dtmf(digit: string): void {
    if (this.status === 'in-progress') this.hearing.dtmf(digit);
  }

  private interrupt(): void {
    this.hooks.interruption?.();
    this.finishResponse(true);
    this.send({ type: 'INTERRUPT' });
  }

  /** The caller's turn, in words; `heard` when it was spoken (not keys, not words held over the agent). */
  private userSaid(text: string, heard?: { since: number; silence: number }): void {
    this.transcript.push({ role: 'user', text });
    const endedAt = heard?.since ?? this.clock.now();
    this.reportTurn('user', text, Math.min(this.turnStartedAt ?? endedAt, endedAt), endedAt);
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

  private switchLanguage(code: string): void {
    if (code === this.language.code) return;
    const next = this.spec.languages.find((l) => l.code === code);
    if (!next) return;
    this.language = next;
    this.history.push({ role: 'system', content: `The caller now speaks ${next.name}. Answer in ${next.name}.` });
  }

  /** The realtime model's view of the caller: the end of their speech, and their words. */
  private realtimeEvent(event: RealtimeEvent): void {
    if (this.ended) return;
    if (event.type === 'speech_stopped') {
      const heard = this.hearing.realtimeTurnEnded();
      if (heard) this.realtimeTurn(heard.since, '');
    } else if (event.type === 'user_transcript') {
      if (this.hearing.decidingPause) {
        // Words said over the paused agent: an interruption that stands is the caller's turn.
        const taken = this.hearing.realtimeWords(event.wordless ? '' : event.text);
        if (taken) this.realtimeTurn(taken.since, event.text);
        return;
      }
      const span = this.pendingUserEntry && this.pendingUserEntry.text === '' ? this.pendingSpan : undefined;
      if (this.pendingUserEntry && this.pendingUserEntry.text === '') this.pendingUserEntry.text = event.text;
      else this.transcript.push({ role: 'user', text: event.text });
      const now = this.clock.now();
      this.reportTurn('user', event.text, span?.startedAt ?? now, span?.endedAt ?? now);
      this.pendingUserEntry = undefined;
      this.pendingSpan = undefined;
      this.prune();
    } else if (event.type === 'error') {
      if (event.fatal) this.providerFailed('realtime model', new Error(event.message));
      else this.logger.warn({ message: event.message }, 'realtime model error');
    }
  }

  /** The caller's turn in a realtime call; its words follow from the model unless already known. */
  private realtimeTurn(since: number, text: string): void {
    const entry: TranscriptEntry = { role: 'user', text };
    this.transcript.push(entry);
    this.pendingUserEntry = text === '' ? entry : undefined;
    const startedAt = Math.min(this.turnStartedAt ?? since, since);
    if (text === '') {
      this.pendingSpan = { startedAt, endedAt: since };
      this.turnStartedAt = undefined;
    } else this.reportTurn('user', text, startedAt, since);
    this.probe = { since, silence: endpointDelayMs(this.spec.endpointSensitivity, 'vad', '') };
    this.hooks.turn?.();
    this.send({ type: 'TURN', text: '' });
  }

  /** Drops user entries whose words never arrived. */
  private prune(): void {
    for (let i = this.transcript.length - 1; i >= 0; i--) if (this.transcript[i]!.text === '' && this.transcript[i] !== this.pendingUserEntry) this.transcript.splice(i, 1);
  }

  private providerFailed(kind: string, error: Error): void {
    if (this.ended) return;
    this.logger.warn({ err: error }, `${kind} failed`);
    this.send({ type: 'FAIL', reason: `The ${kind} failed: ${error.message}` });
  }

  // ---------------------------------------------------------------- the agent

  /** One response the machine asked for, by the mode's responder, until the caller heard it all. */
  private async respond(request: ResponseRequest, signal: AbortSignal, sendBack: (event: CallEvent) => void): Promise<void> {
    this.speaker.beginResponse();
    let audioStarted = false;
    this.responseAudioAt = undefined;
    const started = () => {
      if (audioStarted) return;
      audioStarted = true;
      this.responseAudioAt = this.clock.now();
      sendBack({ type: 'RESPONSE_AUDIO' });
    };
    const fixedText = request.kind === 'greeting' || request.kind === 'voicemail';
    let outcome: Outcome;
    if (this.spec.mode === 'pipeline' || (this.spec.mode === 'dualplex' && fixedText)) {
      // A dualplex call speaks its fixed texts itself; the realtime model learns they were said.
      if (fixedText && this.spec.mode !== 'pipeline') this.realtime.addMessage('assistant', request.text);
      outcome = await respondWithModel(this.response, request, signal, started);
    } else outcome = await this.realtime.respond(request, signal, started);
    if (signal.aborted) return;
    await this.speaker.drained(signal);
    if (signal.aborted) return;
    this.finishResponse(false);
    if (outcome.transfer) {
      this.transferring = true;
      await this.hooks.transfer(outcome.transfer).catch((error: unknown) => this.logger.warn({ err: error }, 'transfer failed'));
      sendBack({ type: 'RESPONSE_DONE', outcome: { end: 'completed' } });
      return;
    }
    sendBack({ type: 'RESPONSE_DONE', outcome: request.kind === 'goodbye' || request.kind === 'voicemail' ? { end: 'ended_by_assistant' } : outcome });
  }

  /** Writes the response's transcript entry and history with what the caller heard; `cut` also clears the audio. */
  private finishResponse(cut: boolean): void {
    const heard = this.speaker.endResponse(cut);
    if (!heard) return;
    if (heard.cut && this.spec.mode !== 'pipeline') this.realtime.cut(heard.cut.itemId, heard.cut.ms);
    if (!heard.text) return;
    this.transcript.push({ role: 'assistant', text: heard.text });
    const now = this.clock.now();
    this.reportTurn('assistant', heard.text, this.responseAudioAt ?? now, now);
    this.responseAudioAt = undefined;
    if (this.spec.mode === 'pipeline') this.history.push({ role: 'assistant', content: heard.text });
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
      this.logger.info({ status: top }, 'call status');
      this.hooks.status(top, this.clock.now());
      if (snapshot.status === 'done') this.finish(top, snapshot.context.failure);
    }
  }

  /** The caller hung up / the socket dropped / the carrier reported the end. */
  private finish(status: string, failure: string | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.finishResponse(true);
    this.hearing.close();
    this.realtime.close();
    this.speaker.close();
    this.transport?.close(this.closeReason);
    this.actor.stop();
    const endedAt = this.clock.now();
    // Words the caller said that never became a turn (a hang-up right after them, or said over the agent).
    const unanswered = this.hearing.unanswered();
    if (unanswered) {
      this.transcript.push({ role: 'user', text: unanswered });
      this.reportTurn('user', unanswered, this.turnStartedAt ?? endedAt, endedAt);
    }
    this.prune();
    this.hooks.ended({
      status,
      failure,
      transcript: this.transcriptText(),
      answeredAt: this.answeredAt,
      endedAt,
      durationSeconds: this.answeredAt === null ? 0 : Math.round((endedAt - this.answeredAt) / 1000),
      answeredBy: this.spec.answeredBy ?? (this.answeredAt !== null && this.spec.type !== 'outbound' ? 'human' : this.answeredAt !== null ? 'unknown' : null),
    });
  }

  /** The transcript so far, as the call's end saves it (`role: text` lines). */
  transcriptText(): string {
    return this.transcript.filter((e) => e.text).map((e) => `${e.role}: ${e.text}`).join('\n');
  }

  /**
   * Its owner hangs the call up: it ends at once as `ended`, answered or not (no goodbye), and the
   * media connection closes with `reason`.
   */
  hangUp(reason: string): void {
    if (this.ended) return;
    this.closeReason = reason;
    this.send({ type: 'END', status: 'ended' });
  }

  /** A turn went into the transcript (with words): reported, and the next caller turn starts afresh. */
  private reportTurn(role: 'user' | 'assistant', text: string, startedAt: number, endedAt: number): void {
    if (role === 'user') this.turnStartedAt = undefined;
    if (text) this.hooks.said?.({ role, text, startedAt, endedAt });
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
