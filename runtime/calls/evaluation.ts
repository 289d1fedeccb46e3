import type { DatabasePool } from 'slonik';
import type { CatalogService } from '../catalog/service.js';
import { extractionFields } from '../agent/prompts.js';
import { streamRound } from '../agent/round.js';
import type { LlmRegistry } from '../llm/registry.js';
import type { Logger } from '../logger.js';
import { releaseWithEvaluation } from '../webhooks/repository.js';
import { claimStaleEvaluations, evaluationSubject, pendingEvaluations, saveEvaluation } from './repository.js';

/**
 * Post-call evaluation: with `post_call_evaluation` and a `post_call_schema`, the assistant's text
 * model reads the transcript in JSON mode and fills each field. Values are checked against the
 * field's type (`string`, `number`, `bool`); a missing or mistyped value is null and named under
 * `_errors`; a reply that is not a JSON object is stored as `{_error}`. Either way the result is
 * stored (status `done` or `failed`) and the call's waiting webhook is released with it as
 * `extracted_variables`.
 */

export interface SchemaField {
  readonly name: string;
  readonly type: 'string' | 'number' | 'bool';
  readonly description: string;
}

/**
 * A model's JSON answer without the Markdown fence some models put around it. Cut by position: a
 * pattern like /\s*```$/ restarts at every white-space character, quadratic on an answer padded
 * with them (JSON modes are known to emit long runs).
 */
function unfenced(reply: string): string {
  let text = reply.trim();
  const open = /^```(?:json)?/.exec(text);
  if (open) text = text.slice(open[0].length);
  if (text.endsWith('```')) text = text.slice(0, -3);
  return text.trim();
}

export function checkExtraction(schema: readonly SchemaField[], reply: string): { evaluation: Record<string, unknown>; ok: boolean } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(unfenced(reply));
  } catch {
    return { evaluation: { _error: 'The model did not answer with JSON.', _reply: reply.slice(0, 1000) }, ok: false };
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return { evaluation: { _error: 'The model did not answer with a JSON object.', _reply: reply.slice(0, 1000) }, ok: false };
  const source = parsed as Record<string, unknown>;
  const evaluation: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  for (const field of schema) {
    let value = source[field.name];
    if (value === undefined || value === null) value = null;
    else if (field.type === 'number' && typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) value = Number(value);
    else if (field.type === 'bool' && typeof value === 'string' && /^(true|false)$/i.test(value)) value = value.toLowerCase() === 'true';
    const expected = field.type === 'bool' ? 'boolean' : field.type;
    if (value !== null && (typeof value !== expected || (typeof value === 'number' && !Number.isFinite(value)))) {
      errors[field.name] = `expected a ${field.type}, got ${JSON.stringify(value).slice(0, 100)}`;
      value = null;
    }
    evaluation[field.name] = value;
  }
  if (Object.keys(errors).length > 0) evaluation._errors = errors;
  return { evaluation, ok: true };
}

/** An evaluation pending with its call untouched this long is taken up again (one takes seconds; the webhook waits 10 minutes at most). */
const STALE_EVALUATION_MINUTES = 15;

export function createEvaluator(deps: { pool: DatabasePool; catalog: CatalogService; llm: LlmRegistry; logger: Logger; onDone: () => void }) {
  const { pool, logger } = deps;
  const running = new Map<number, Promise<void>>();

  function evaluate(callId: number): Promise<void> {
    let pending = running.get(callId);
    if (!pending) {
      pending = run(callId).finally(() => running.delete(callId));
      running.set(callId, pending);
    }
    return pending;
  }

  async function run(callId: number): Promise<void> {
    try {
      const call = await evaluationSubject(pool, callId);
      if (!call) return;
      const schema = call.post_call_schema ?? [];
      let result: { evaluation: Record<string, unknown>; ok: boolean };
      if (schema.length === 0) result = { evaluation: { _error: 'The assistant has no evaluation schema any more.' }, ok: false };
      else {
        const catalog = await deps.catalog.get();
        const row = catalog.models.get((call.mode === 'pipeline' ? call.llm_model_id : call.chat_llm_fallback_id) ?? -1) ?? catalog.modelsOfType('llm')[0];
        const llm = row ? { provider: deps.llm.provider(row.provider), model: row.code } : { provider: deps.llm.provider('dev'), model: 'dev' };
        try {
          const reply = await streamRound(
            {
              llm,
              fallback: undefined,
              messages: [
                {
                  role: 'system',
                  content: `You extract data from the transcript of a phone call. Answer with one JSON object that has exactly these keys, each value of the given type (string, number or bool); use null when the call does not say.\n${extractionFields(schema)}`,
                },
                { role: 'user', content: call.transcript },
              ],
              functions: [],
              temperature: 0,
              json: true,
              onDelta: () => {},
            },
            logger,
            { callId },
          );
          result = checkExtraction(schema, reply.text);
        } catch (error) {
          result = { evaluation: { _error: `The model failed: ${error instanceof Error ? error.message : String(error)}` }, ok: false };
        }
      }
      await pool.transaction(async (tx) => {
        // The first result saved stands: one taken up again elsewhere meanwhile does not replace it (nor the webhook's copy).
        if (await saveEvaluation(tx, callId, result.evaluation, result.ok)) await releaseWithEvaluation(tx, callId, result.evaluation);
      });
      deps.onDone();
    } catch (error) {
      logger.error({ err: error, callId }, 'post-call evaluation could not be saved');
    }
  }

  return {
    evaluate(callId: number): void {
      void evaluate(callId);
    },
    /** Evaluations a stopped process left pending. */
    async resume(): Promise<void> {
      for (const id of await pendingEvaluations(pool)) await evaluate(id);
    },
    /**
     * Evaluations still pending long after their call ended (one whose result could not be saved,
     * a process stopped mid-way), while the process runs; younger ones are under way somewhere.
     */
    async sweep(): Promise<number> {
      // Claimed by touching the row: another process's sweep leaves it for the next 15 minutes, as
      // it leaves a call whose end (or evaluation) was saved lately.
      const ids = await claimStaleEvaluations(pool, STALE_EVALUATION_MINUTES);
      for (const id of ids) await evaluate(id);
      return ids.length;
    },
    /** Resolves when the evaluation of `callId` (if any is running) is saved. */
    settled(callId: number): Promise<void> {
      return running.get(callId) ?? Promise.resolve();
    },
    async idle(): Promise<void> {
      await Promise.all(running.values());
    },
  };
}

export type Evaluator = ReturnType<typeof createEvaluator>;
