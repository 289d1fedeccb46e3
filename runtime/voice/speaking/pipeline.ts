import { knowledgeSection } from '../../agent/knowledge.js';
import { MAX_TOOL_ROUNDS, streamRound } from '../../agent/round.js';
import type { ChatMessage, FunctionDefinition, ToolCall } from '../../llm/types.js';
import type { ResponseRequest } from '../machine.js';
import type { BuiltinEffect } from './builtins.js';
import { filler as fillerPhrase, type FillerKind } from './fillers.js';
import { instructionFor, outcomeOf, runToolCall, type Outcome, type ResponseContext } from './response.js';
import { SentenceChunker } from './sentences.js';
import { SpeechQueue } from './speechQueue.js';

/**
 * The text model's responder (pipeline mode, and the fixed texts of dualplex): a greeting or a
 * voicemail message is spoken as written; a turn, a re-engagement or a goodbye goes to the text
 * model, whose sentences are spoken by the TTS as they complete, with tool rounds in between.
 */

/** Silence before a filler: the model's first words, or a function's result, taking longer than this. */
const FILLER_DELAY_MS = 800;

export async function respondWithModel(context: ResponseContext, request: ResponseRequest, signal: AbortSignal, started: () => void): Promise<Outcome> {
  if (request.kind === 'greeting' || request.kind === 'voicemail') {
    // What was said joins the history once, as heard, when the response finishes.
    if (request.kind === 'greeting' && request.after) context.history.push({ role: 'user', content: request.after });
    await context.speaker.say(request.text, context.language(), signal, started);
    return {};
  }
  const messages = [...context.history];
  if (request.kind !== 'turn') {
    messages.push({ role: 'system', content: instructionFor(context, request) });
    return new ModelResponse(context, signal, started, '', false).run(messages, []);
  }
  context.history.push({ role: 'user', content: request.text });
  messages.push({ role: 'user', content: request.text });
  const knowledge = await knowledgeFor(context, request.text);
  if (knowledge && messages[0]?.role === 'system') messages[0] = { role: 'system', content: `${messages[0].content}\n\n${knowledge}` };
  return new ModelResponse(context, signal, started, request.text, true).run(messages, context.spec.functions);
}

/** The passages of the prompt-mode knowledgebase that best answer `text`, as the system prompt carries them; '' without. */
async function knowledgeFor(context: ResponseContext, text: string): Promise<string> {
  const kbId = context.spec.promptKnowledgebaseId;
  if (kbId === undefined) return '';
  const { knowledge, ownerId } = context.spec.functionContext;
  const passages = await knowledge.search(ownerId, kbId, text, 3).catch((error: unknown) => {
    context.logger.warn({ err: error }, 'knowledge for the turn could not be searched');
    return [];
  });
  return knowledgeSection(passages);
}

/**
 * One answer of the text model: rounds with tools until it answers in words. Sentences are spoken
 * as they complete; one filler at most fills a silence of FILLER_DELAY_MS (when the answer is to the
 * caller).
 */
class ModelResponse {
  private readonly effects: BuiltinEffect[] = [];
  private readonly speech = new SpeechQueue();
  private heardAnything = false;
  private fillerSaid = false;
  private filler: unknown;
  /**
   * The tool round in progress. It joins the call's history whole: the calls, then an answer to
   * each (one cut off by a barge-in or hang-up says so), at once when the response is aborted, so
   * the next turn's model never sees calls without their results.
   */
  private toolRound: { calls: readonly ToolCall[]; results: Map<string, ChatMessage> } | undefined;

  constructor(
    private readonly context: ResponseContext,
    private readonly signal: AbortSignal,
    private readonly started: () => void,
    /** The caller's words this answers ('' for a re-engagement or a goodbye). */
    private readonly userText: string,
    /** Whether silence may be filled (an answer to the caller; not a goodbye or a re-engagement). */
    private readonly fillers: boolean,
  ) {}

  async run(messages: ChatMessage[], functions: readonly FunctionDefinition[]): Promise<Outcome> {
    const recordToolRound = () => this.recordToolRound();
    this.signal.addEventListener('abort', recordToolRound, { once: true });
    try {
      for (let round = 0; !this.signal.aborted; round++) {
        // The model has not begun (or, after a tool round, not resumed) its answer.
        this.fillIn('wait');
        const calls = await this.round(messages, round >= MAX_TOOL_ROUNDS ? [] : functions);
        this.stopFiller();
        if (this.signal.aborted || calls.length === 0) break;
        await this.runTools(messages, calls);
      }
      await this.speech.done();
    } finally {
      this.stopFiller();
      this.signal.removeEventListener('abort', recordToolRound);
    }
    return outcomeOf(this.effects);
  }

  /** One streamed round: its sentences are spoken as they complete; returns the tools it called. */
  private async round(messages: ChatMessage[], functions: readonly FunctionDefinition[]): Promise<readonly ToolCall[]> {
    const { spec, hooks, logger } = this.context;
    const chunker = new SentenceChunker();
    const asked = performance.now();
    let first = true;
    const result = await streamRound(
      {
        llm: spec.llm,
        fallback: spec.fallback,
        messages,
        functions,
        temperature: spec.temperature,
        signal: this.signal,
        onDelta: (delta) => {
          if (first) hooks.firstByte?.('llm', spec.llm.provider.name, performance.now() - asked);
          first = false;
          this.heardAnything = true;
          for (const sentence of chunker.push(delta)) this.say(sentence);
        },
      },
      logger,
      { callId: spec.callId },
    );
    if (this.signal.aborted) return [];
    for (const sentence of chunker.flush()) this.say(sentence);
    if (result.calls.length > 0) messages.push({ role: 'assistant', content: result.text || null, toolCalls: result.calls });
    return result.calls;
  }

  private async runTools(messages: ChatMessage[], calls: readonly ToolCall[]): Promise<void> {
    this.fillIn('tool');
    this.toolRound = { calls, results: new Map() };
    for (const call of calls) {
      // After a hang-up or barge-in no further tool runs (a booking, a transfer) on the turn's behalf.
      if (this.signal.aborted) break;
      const output = await runToolCall(this.context, call, this.effects, this.userText, this.started);
      const message: ChatMessage = { role: 'tool', content: JSON.stringify(output), toolCallId: call.id };
      messages.push(message);
      this.toolRound?.results.set(call.id, message);
    }
    this.stopFiller();
    this.recordToolRound();
  }

  private recordToolRound(): void {
    const round = this.toolRound;
    if (!round) return;
    this.toolRound = undefined;
    const history = this.context.history;
    history.push({ role: 'assistant', content: null, toolCalls: round.calls });
    for (const call of round.calls) {
      history.push(round.results.get(call.id) ?? { role: 'tool', content: JSON.stringify({ error: 'Not run: the call moved on before it could.' }), toolCallId: call.id });
    }
  }

  private say(sentence: string): void {
    this.speech.add(() => this.context.speaker.say(sentence, this.context.language(), this.signal, this.started));
  }

  /**
   * Arms the filler: said after FILLER_DELAY_MS of silence while the model has not begun (or not
   * resumed after a tool round), or while a function it called without a word first runs. Anything
   * the model has said by then makes it unneeded.
   */
  private fillIn(kind: FillerKind): void {
    const { spec, clock } = this.context;
    if (!this.fillers || !spec.fillers || this.fillerSaid || this.heardAnything) return;
    this.filler = clock.setTimeout(() => {
      this.filler = undefined;
      const phrase = fillerPhrase(this.context.language().code, kind, spec.callId);
      if (phrase === undefined || this.heardAnything || this.signal.aborted) return;
      this.fillerSaid = true;
      this.say(phrase);
    }, FILLER_DELAY_MS);
  }

  private stopFiller(): void {
    if (this.filler !== undefined) this.context.clock.clearTimeout(this.filler);
    this.filler = undefined;
  }
}
