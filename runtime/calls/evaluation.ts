import type { DatabasePool } from 'slonik';
import type { CatalogService } from '../catalog/service.js';
import { extractionFields } from '../agent/prompts.js';
import { streamRound } from '../agent/round.js';
import type { Clock } from '../clock.js';
import type { LlmRegistry } from '../llm/registry.js';
import type { Logger } from '../logger.js';
import { releaseWithEvaluation } from '../webhooks/repository.js';
import {
  claimEvaluation,
  claimNextEvaluation,
  evaluationSubject,
  releaseEvaluation,
  renewEvaluationLease,
  saveEvaluation,
  type EvaluationClaim,
} from './repository.js';

/**
 * Post-call evaluation: with `post_call_evaluation` and a `post_call_schema`, the assistant's text
 * model reads the transcript in JSON mode and fills each field. Values are checked against the
 * field's type (`string`, `number`, `bool`); a missing or mistyped value is null and named under
 * `_errors`; a reply that is not a JSON object is stored as `{_error}`. Either way the result is
 * stored (status `done` or `failed`) and the call's waiting webhook is released with it as
 * `extracted_variables`. An evaluation is run under a claim with a lease (repository.ts), renewed
 * while it runs; a run whose lease was taken over saves nothing, so each is written once.
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

/** An evaluation's lease: renewed every third of it while the model reads (one takes seconds). */
export const EVALUATION_LEASE_MS = 60_000;
/** What the model extracts from the call's transcript; null when its evaluation is not pending any more. */
async function extract(deps: { pool: DatabasePool; catalog: CatalogService; llm: LlmRegistry; logger: Logger }, callId: number): Promise<Extraction | null> {
  const { pool, logger } = deps;
  const call = await evaluationSubject(pool, callId);
  if (!call) return null;
  const schema = call.post_call_schema ?? [];
  if (schema.length === 0) return { evaluation: { _error: 'The assistant has no evaluation schema any more.' }, ok: false };
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
    return checkExtraction(schema, reply.text);
  } catch (error) {
    return { evaluation: { _error: `The model failed: ${error instanceof Error ? error.message : String(error)}` }, ok: false };
  }
}

/** Evaluations one sweep takes up at most. */
const SWEEP_LIMIT = 100;

type Extraction = { evaluation: Record<string, unknown>; ok: boolean };

export function createEvaluator(deps: {
  pool: DatabasePool;
  catalog: CatalogService;
  llm: LlmRegistry;
  logger: Logger;
  /** The clock of the lease renewals (the lease itself is kept in database time). */
  clock: Clock;
  /** @defaultValue EVALUATION_LEASE_MS */
  leaseMs?: number;
  onDone: () => void;
  /** A result was dropped: its lease had been taken over (metrics). */
  onLeaseLost?: () => void;
}) {
  const { pool, logger, clock } = deps;
  const leaseMs = deps.leaseMs ?? EVALUATION_LEASE_MS;
  /** Runs by call; the claim each holds once it has one. */
  const running = new Map<number, Promise<void>>();
  const held = new Map<number, EvaluationClaim>();
  const sweeps = new Set<Promise<number>>();

  /**
   * Evaluates `callId` under `claim`, or under a claim of its own taken first (nothing happens when
   * the evaluation is not pending, or another run holds it). A run of the same call in this process
   * goes first; a new claim then waits for it.
   */
  function evaluate(callId: number, claim?: EvaluationClaim): Promise<void> {
    const current = running.get(callId);
    if (current && !claim) return current;
    const next: Promise<void> = (current ?? Promise.resolve()).then(() => run(callId, claim)).finally(() => {
      if (running.get(callId) === next) running.delete(callId);
    });
    running.set(callId, next);
    return next;
  }

  async function run(callId: number, given: EvaluationClaim | undefined): Promise<void> {
    try {
      const claim = given ?? (await claimEvaluation(pool, callId, leaseMs));
      if (!claim) return;
      held.set(callId, claim);
      const stopRenewing = clock.every(Math.max(50, Math.floor(leaseMs / 3)), () =>
        renewEvaluationLease(pool, claim, leaseMs).catch((error: unknown) => logger.warn({ err: error, callId }, "could not renew an evaluation's lease")),
      );
      let saved: boolean;
      try {
        const result = await extract(deps, callId);
        if (!result) return;
        // Saved, and the webhook's copy released, only under the claim: a run whose lease was taken over writes nothing.
        saved = await pool.transaction(async (tx) => {
          if (!(await saveEvaluation(tx, claim, result.evaluation, result.ok))) return false;
          await releaseWithEvaluation(tx, callId, result.evaluation);
          return true;
        });
      } finally {
        stopRenewing();
        held.delete(callId);
      }
      if (!saved) {
        deps.onLeaseLost?.();
        logger.warn({ callId }, "the lease on a call's evaluation was taken over; its result is dropped");
        return;
      }
      deps.onDone();
    } catch (error) {
      logger.error({ err: error, callId }, 'post-call evaluation could not be saved');
    }
  }

  /** Takes up, one at a time, pending evaluations no claim holds. @returns how many it took. */
  async function takeUp(): Promise<number> {
    let taken = 0;
    while (taken < SWEEP_LIMIT) {
      const next = await claimNextEvaluation(pool, leaseMs);
      if (!next) break;
      taken++;
      await evaluate(next.id, next);
    }
    return taken;
  }

  function sweep(): Promise<number> {
    const swept = takeUp().finally(() => sweeps.delete(swept));
    sweeps.add(swept);
    return swept;
  }

  return {
    evaluate(callId: number): void {
      void evaluate(callId);
    },
    /** Evaluations a stopped process left pending (given back at its stop, or their lease ran out). */
    async resume(): Promise<void> {
      await sweep();
    },
    /**
     * Evaluations pending that no claim holds (one whose result could not be saved, a process
     * stopped or stalled mid-way), while the process runs; one under a live lease is under way
     * somewhere. Two processes' sweeps at once take each evaluation once.
     */
    sweep,
    /** Resolves when the evaluation of `callId` (if any is running) is saved. */
    settled(callId: number): Promise<void> {
      return running.get(callId) ?? Promise.resolve();
    },
    /** Resolves once no sweep and no evaluation runs. */
    async idle(): Promise<void> {
      while (sweeps.size > 0 || running.size > 0) await Promise.allSettled([...sweeps, ...running.values()]);
    },
    /** At a stop, after its grace: evaluations still running are given back for any process to take up at once. */
    async release(): Promise<void> {
      await Promise.allSettled(
        [...held.values()].map((claim) =>
          releaseEvaluation(pool, claim).catch((error: unknown) => logger.warn({ err: error, callId: claim.id }, 'could not give an evaluation back; its lease will lapse')),
        ),
      );
    },
  };
}

export type Evaluator = ReturnType<typeof createEvaluator>;
