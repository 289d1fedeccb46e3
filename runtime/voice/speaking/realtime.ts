import { MAX_TOOL_ROUNDS, streamRound, type ModelChoice } from '../../agent/round.js';
import type { ChatMessage } from '../../llm/types.js';
import { endpointDelayMs } from '../hearing/turns.js';
import type { ResponseRequest } from '../machine.js';
import { SAY_EXACTLY, type RealtimeEvent, type RealtimeSession } from '../providers/types.js';
import type { BuiltinEffect } from './builtins.js';
import type { Segment } from './playout.js';
import { instructionFor, outcomeOf, runToolCall, type Outcome, type ResponseContext } from './response.js';
import { SentenceChunker } from './sentences.js';
import { SpeechQueue } from './speechQueue.js';

/**
 * The realtime model's side of a multimodal or dualplex call: the session with the vendor, and its
 * responses. A response is asked for when the call machine wants one, and followed by its tag and
 * then its id; its audio is played (multimodal) or its text spoken by the TTS (dualplex); the
 * functions it calls are run and their results sent back, and when its function calling fails the
 * call's text model (`chat_llm_fallback_id`) takes the tool round. Events that are not a response's
 * (the caller's speech and words, errors) go to the session's `onEvent`.
 */

/** A realtime response that shows no progress (started, audio, text, a function call) for this long is taken to have failed. */
const REALTIME_RESPONSE_TIMEOUT_MS = 10_000;

export class RealtimeVoice {
  private session: RealtimeSession | undefined;
  private listener: ((event: RealtimeEvent) => void) | undefined;
  /** Responses asked of the session so far; each ask's number is its tag. */
  private asks = 0;

  constructor(
    private readonly context: ResponseContext,
    private readonly onEvent: (event: RealtimeEvent) => void,
  ) {}

  /** Connects (once) to the assistant's realtime model. */
  open(): void {
    const { spec } = this.context;
    if (this.session || !spec.realtime) return;
    const { provider, model, voice, threshold } = spec.realtime;
    this.session = provider.connect({
      callId: spec.callId,
      model,
      instructions: spec.systemPrompt,
      voice,
      tools: spec.functions,
      temperature: spec.temperature,
      turnDetectionThreshold: threshold,
      silenceMs: endpointDelayMs(spec.endpointSensitivity, 'vad', ''),
      endpointType: spec.endpointType,
      output: spec.mode === 'dualplex' ? 'text' : 'audio',
      speed: spec.voiceSettings.speed,
      onEvent: (event) => {
        if (event.type === 'speech_stopped' || event.type === 'user_transcript' || event.type === 'error') this.onEvent(event);
        else this.listener?.(event);
      },
    });
  }

  appendAudio(frame: Int16Array): void {
    this.session?.appendAudio(frame);
  }

  /** Text the model should take as said (the greeting, keys the caller pressed). */
  addMessage(role: 'user' | 'assistant', text: string): void {
    this.session?.addMessage(role, text);
  }

  /** The response was cut: the model hears how much of its item went out, and stops. */
  cut(itemId: string | undefined, ms: number): void {
    if (itemId) this.session?.truncate(itemId, ms);
    this.session?.cancelResponse();
  }

  close(): void {
    this.session?.close();
  }

  /** Asks the model for the response `request` and follows it to its end. */
  async respond(request: ResponseRequest, signal: AbortSignal, started: () => void): Promise<Outcome> {
    const session = this.session;
    if (!session) throw new Error('The realtime model is not connected');
    const instructions =
      request.kind === 'reengage' || request.kind === 'goodbye'
        ? instructionFor(this.context, request)
        : request.kind === 'greeting' || request.kind === 'voicemail'
          ? `${SAY_EXACTLY}"${request.text}"`
          : undefined;
    const response = new RealtimeResponse(this.context, session, signal, started, () => String(++this.asks));
    this.listener = (event) => response.event(event);
    try {
      await response.run(instructions);
    } finally {
      this.listener = undefined;
    }
    return outcomeOf(response.effects);
  }
}

/** One response of the realtime model, with its tool rounds, followed from the ask to its end. */
class RealtimeResponse {
  readonly effects: BuiltinEffect[] = [];
  private readonly speech = new SpeechQueue();
  private rounds = 0;
  private segment: Segment | undefined;
  private spokenText = '';
  private chunker = new SentenceChunker();
  private pendingCalls: { callId: string; name: string; arguments: string }[] = [];
  // The response this turn follows: asked for and not yet started, or started with this id.
  // Events of any other (one cancelled after a stall, its late `done`) are not this turn's.
  private awaiting = false;
  private responseId: string | undefined;
  private tag = '';
  private timer: unknown;
  private settle: { resolve(): void; reject(error: unknown): void } | undefined;

  constructor(
    private readonly context: ResponseContext,
    private readonly session: RealtimeSession,
    private readonly signal: AbortSignal,
    private readonly started: () => void,
    private readonly nextTag: () => string,
  ) {}

  /** Resolves when the response and its tool rounds are over (or aborted), and its speech spoken. */
  async run(instructions: string | undefined): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
      this.signal.addEventListener('abort', () => this.done(), { once: true });
      this.ask(instructions);
    });
    await this.speech.done();
  }

  event(event: RealtimeEvent): void {
    if (this.signal.aborted) return;
    if (event.type === 'response_started') return this.responseStarted(event.responseId, event.tag);
    if (!('responseId' in event) || this.responseId === undefined || event.responseId !== this.responseId) return;
    this.progress();
    switch (event.type) {
      case 'audio': {
        if (!this.context.speaker.responding) return;
        this.segment ??= this.context.speaker.realtimeSegment(this.spokenText, event.itemId);
        if (!this.segment) return;
        this.started();
        this.context.speaker.push(this.segment, event.samples);
        return;
      }
      case 'text':
        if (this.context.spec.mode === 'dualplex') for (const sentence of this.chunker.push(event.delta)) this.say(sentence);
        else {
          this.spokenText += event.delta;
          if (this.segment) this.segment.text = this.spokenText;
        }
        return;
      case 'function_call':
        this.pendingCalls.push({ callId: event.callId, name: event.name, arguments: event.arguments });
        return;
      case 'response_done':
        return this.responseDone(event.status);
    }
  }

  private ask(text?: string): void {
    this.awaiting = true;
    this.responseId = undefined;
    this.tag = this.nextTag();
    this.progress();
    this.session.createResponse(text, this.tag);
  }

  private responseStarted(responseId: string, tag: string | undefined): void {
    // A vendor that echoes tags names the ask it answers; one that does not, the first start
    // after it. A late start of an earlier ask is stopped rather than left to talk.
    if (tag !== undefined && tag !== this.tag) return this.session.cancelResponse();
    if (!this.awaiting) return;
    this.awaiting = false;
    this.responseId = responseId;
    this.segment = undefined;
    this.spokenText = '';
    this.chunker = new SentenceChunker();
    this.progress();
  }

  private responseDone(status: string): void {
    this.stopTimer();
    this.responseId = undefined;
    if (this.segment) this.context.speaker.finish(this.segment);
    for (const sentence of this.chunker.flush()) this.say(sentence);
    const unreadable = this.pendingCalls.some((call) => !isJsonObject(call.arguments));
    if (status === 'failed' || unreadable) return this.failed(unreadable ? 'The realtime model wrote unreadable function arguments' : 'The realtime model could not answer');
    if (this.pendingCalls.length === 0 || this.rounds >= MAX_TOOL_ROUNDS) return this.done();
    this.rounds++;
    const calls = this.pendingCalls;
    this.pendingCalls = [];
    void (async () => {
      for (const call of calls) {
        const output = await runToolCall(this.context, { id: call.callId, name: call.name, arguments: call.arguments }, this.effects, '', this.started);
        this.session.sendFunctionResult(call.callId, output);
      }
      if (!this.signal.aborted) this.ask();
    })().catch((error: unknown) => this.settle?.reject(error));
  }

  /** The model's answer or its function calling failed: the text model takes the tool round. */
  private failed(reason: string): void {
    this.stopTimer();
    this.awaiting = false;
    this.responseId = undefined;
    if (this.segment) this.context.speaker.finish(this.segment);
    this.segment = undefined;
    this.pendingCalls = [];
    const fallback = this.context.spec.toolFallback;
    if (!fallback || this.rounds >= MAX_TOOL_ROUNDS || this.signal.aborted) return this.settle?.reject(new Error(reason));
    this.rounds++;
    this.context.logger.warn({ reason }, 'realtime function calling failed; the text model takes over');
    void this.toolRoundWithTextModel(fallback).then(
      (said) => {
        if (this.signal.aborted) return;
        if (said.results.length === 0) return this.ask(`${SAY_EXACTLY}"${said.text.replace(/"/g, "'")}"`);
        for (const result of said.results) this.session.addMessage('user', `[The ${result.name} tool returned: ${JSON.stringify(result.output)}]`);
        this.ask();
      },
      (error: unknown) => this.settle?.reject(error),
    );
  }

  /** One text-model round over the transcript so far, with the tools; runs what it calls. */
  private async toolRoundWithTextModel(model: ModelChoice): Promise<{ text: string; results: Array<{ name: string; output: unknown }> }> {
    const { spec, logger, transcript } = this.context;
    const messages: ChatMessage[] = [{ role: 'system', content: spec.systemPrompt }, ...transcript.filter((e) => e.text).map((e): ChatMessage => ({ role: e.role, content: e.text }))];
    const round = await streamRound({ llm: model, fallback: undefined, messages, functions: spec.functions, temperature: spec.temperature, signal: this.signal, onDelta: () => {} }, logger, {});
    const results = [];
    for (const call of round.calls) {
      if (this.signal.aborted) break;
      results.push({ name: call.name, output: await runToolCall(this.context, call, this.effects, '', this.started) });
    }
    return { text: round.text, results };
  }

  private say(sentence: string): void {
    this.speech.add(() => this.context.speaker.say(sentence, this.context.language(), this.signal, this.started));
  }

  /** Arms, or re-arms, the stall timer: the response must show progress every REALTIME_RESPONSE_TIMEOUT_MS. */
  private progress(): void {
    this.stopTimer();
    this.timer = this.context.clock.setTimeout(() => {
      this.timer = undefined;
      this.session.cancelResponse();
      this.failed('The realtime model did not answer in time');
    }, REALTIME_RESPONSE_TIMEOUT_MS);
  }

  private stopTimer(): void {
    if (this.timer !== undefined) this.context.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private done(): void {
    this.stopTimer();
    this.settle?.resolve();
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
