import { assign, fromCallback, setup, type AnyEventObject } from 'xstate';

/**
 * One call as an actor. The top-level states are the call statuses of spec section 3 (each one is
 * persisted when entered); inside `in-progress` the agent is `listening`, `responding` (`thinking`
 * until its first audio, then `speaking`), `away` (the caller went silent; re-engaging) or
 * `closing` (saying goodbye before the call ends). Audio never reaches the actor: the session turns
 * 20 ms frames into a few events per turn (speech start/stop, end of turn, interruption).
 *
 * Timers (all from the assistant, run on the injected clock): `ringing_time` → `no-answer`;
 * `max_duration` → goodbye 5 s before it, `ended_by_assistant`, hung up at it at the latest; `max_initial_silence_duration` → the call ends
 * (`ended`) when the caller has said nothing that long after the answer; `max_silence_duration` of
 * caller silence → re-engagement, repeated every `reengagement_interval`.
 */

export interface CallTimers {
  readonly ringingMs: number;
  readonly maxDurationMs: number;
  readonly maxSilenceMs: number;
  readonly initialSilenceMs: number | null;
  readonly reengageMs: number;
}

export type ResponseRequest =
  /** `after`: what the caller said first, when the assistant waited for them (`wait_for_customer`). */
  | { readonly kind: 'greeting'; readonly text: string; readonly after?: string }
  | { readonly kind: 'turn'; readonly text: string }
  | { readonly kind: 'reengage' }
  | { readonly kind: 'goodbye'; readonly reason: 'max_duration' | 'balance' | 'voicemail' | 'initial_silence' | 'shutdown' }
  | { readonly kind: 'voicemail'; readonly text: string };

export type EndedStatus = 'completed' | 'ended_by_customer' | 'ended_by_assistant' | 'ended';
export type CarrierFailure = 'busy' | 'no-answer' | 'failed';

export interface ResponseOutcome {
  /** The model asked to end the call (`end_call`) or the response was a goodbye. */
  readonly end?: EndedStatus;
}

export type CallEvent =
  | { type: 'RINGING' }
  | { type: 'ANSWERED' }
  | { type: 'CARRIER_FAILED'; status: CarrierFailure; reason?: string }
  | { type: 'CALLER_HUNG_UP' }
  | { type: 'CONNECTION_LOST' }
  | { type: 'CARRIER_COMPLETED' }
  | { type: 'SPEECH_START' }
  | { type: 'SPEECH_STOP' }
  | { type: 'TURN'; text: string }
  | { type: 'INTERRUPT' }
  | { type: 'RESPONSE_AUDIO' }
  | { type: 'RESPONSE_DONE'; outcome: ResponseOutcome }
  | { type: 'RESPONSE_FAILED'; reason: string }
  | { type: 'END'; status: EndedStatus; goodbye?: ResponseRequest }
  | { type: 'VOICEMAIL'; hangUp: boolean; message: string | null }
  | { type: 'FAIL'; reason: string };

export interface CallMachineInput {
  readonly timers: CallTimers;
  readonly greeting: string | null;
  readonly waitForCustomer: boolean;
}

interface Context {
  readonly timers: CallTimers;
  readonly greeting: string | null;
  readonly waitForCustomer: boolean;
  readonly callerSpoke: boolean;
  readonly reengaged: boolean;
  /** `wait_for_customer`: the greeting is owed once the caller has spoken. */
  readonly greetingOwed: boolean;
  readonly request: ResponseRequest | undefined;
  readonly ending: EndedStatus;
  readonly failure: string | undefined;
}

export const CALL_STATUS_STATES = ['initiated', 'ringing', 'busy', 'in-progress', 'no-answer', 'failed', 'completed', 'ended_by_customer', 'ended_by_assistant', 'ended'] as const;

const GOODBYE_TIMEOUT_MS = 20_000;
/**
 * `max_duration` is a maximum: the goodbye starts this long before it, and a call still open when
 * it is reached (a long goodbye, a voicemail message) is hung up then.
 */
const MAX_DURATION_GOODBYE_LEAD_MS = 5_000;
/**
 * A call still `initiated` this long after it was created never connected (no carrier report, no
 * media stream; the stream's one-time token has expired by then): it fails instead of waiting forever.
 */
export const CONNECT_TIMEOUT_MS = 5 * 60_000;
const VOICEMAIL_BEEP_WAIT_MS = 30_000;

export const callMachine = setup({
  types: {
    context: {} as Context,
    events: {} as CallEvent,
    input: {} as CallMachineInput,
  },
  actors: {
    respond: fromCallback<AnyEventObject, ResponseRequest>(() => {
      throw new Error('respond is provided by the session');
    }),
  },
  delays: {
    ringing: ({ context }) => context.timers.ringingMs,
    maxDuration: ({ context }) => Math.max(0, context.timers.maxDurationMs - MAX_DURATION_GOODBYE_LEAD_MS),
    durationLimit: ({ context }) => context.timers.maxDurationMs,
    initialSilence: ({ context }) => context.timers.initialSilenceMs ?? context.timers.maxDurationMs + 1,
    silence: ({ context }) => (context.reengaged ? context.timers.reengageMs : context.timers.maxSilenceMs),
    goodbye: GOODBYE_TIMEOUT_MS,
    beep: VOICEMAIL_BEEP_WAIT_MS,
    connect: CONNECT_TIMEOUT_MS,
  },
  guards: {
    greetsFirst: ({ context }) => context.greeting !== null && context.greeting.trim() !== '' && !context.waitForCustomer,
    hasGreeting: ({ context }) => context.greeting !== null && context.greeting.trim() !== '',
    callerSilentSoFar: ({ context }) => context.timers.initialSilenceMs !== null && !context.callerSpoke,
    ends: ({ event }) => event.type === 'RESPONSE_DONE' && event.outcome.end !== undefined,
  },
  actions: {
    callerSpoke: assign({ callerSpoke: true, reengaged: false }),
  },
}).createMachine({
  id: 'call',
  context: ({ input }) => ({ ...input, callerSpoke: false, reengaged: false, greetingOwed: false, request: undefined, ending: 'ended', failure: undefined }),
  initial: 'initiated',
  // Before the answer (in-progress handles its own hang-ups and losses).
  on: {
    FAIL: { target: '.failed', actions: assign({ failure: ({ event }) => event.reason }) },
    CARRIER_FAILED: [
      { guard: ({ event }) => event.status === 'busy', target: '.busy' },
      { guard: ({ event }) => event.status === 'no-answer', target: '.no-answer' },
      { target: '.failed', actions: assign({ failure: ({ event }) => event.reason ?? 'The carrier could not place the call' }) },
    ],
    CALLER_HUNG_UP: '.no-answer',
    CONNECTION_LOST: { target: '.failed', actions: assign({ failure: 'The call connection was lost before it was answered' }) },
    // Its owner hung up a call not yet answered: `ended`, as an answered one would be.
    END: '.ended',
  },
  states: {
    initiated: {
      after: { connect: { target: 'failed', actions: assign({ failure: 'The call was not connected within 5 minutes' }) } },
      on: {
        RINGING: 'ringing',
        ANSWERED: 'in-progress',
      },
    },
    ringing: {
      after: { ringing: 'no-answer' },
      on: {
        ANSWERED: 'in-progress',
      },
    },
    'in-progress': {
      after: {
        maxDuration: { target: '.closing', actions: assign({ request: { kind: 'goodbye', reason: 'max_duration' }, ending: 'ended_by_assistant' }) },
        durationLimit: { target: '.hanging_up', actions: assign({ ending: ({ context }) => (context.ending === 'ended' ? 'ended_by_assistant' : context.ending) }) },
        initialSilence: { guard: 'callerSilentSoFar', target: '.closing', actions: assign({ request: { kind: 'goodbye', reason: 'initial_silence' }, ending: 'ended' }) },
      },
      on: {
        CALLER_HUNG_UP: 'ended_by_customer',
        CONNECTION_LOST: 'ended',
        CARRIER_COMPLETED: 'completed',
        END: [
          { guard: ({ event }) => event.goodbye !== undefined, target: '.closing', actions: assign({ request: ({ event }) => event.goodbye, ending: ({ event }) => event.status }) },
          { target: '.hanging_up', actions: assign({ ending: ({ event }) => event.status }) },
        ],
        VOICEMAIL: [
          { guard: ({ event }) => event.hangUp, target: '.hanging_up', actions: assign({ ending: 'ended_by_assistant' }) },
          { guard: ({ event }) => event.message !== null, target: '.voicemail', actions: assign({ request: ({ event }) => ({ kind: 'voicemail' as const, text: event.message! }), ending: 'ended_by_assistant' }) },
        ],
        SPEECH_START: { actions: 'callerSpoke' },
      },
      initial: 'opening',
      states: {
        opening: {
          always: [
            { guard: 'greetsFirst', target: 'responding', actions: assign({ request: ({ context }) => ({ kind: 'greeting' as const, text: context.greeting! }) }) },
            { guard: 'hasGreeting', target: 'listening', actions: assign({ greetingOwed: true }) },
            { target: 'listening' },
          ],
        },
        listening: {
          initial: 'quiet',
          states: {
            quiet: { after: { silence: '#call.in-progress.away' } },
            hearing: {},
          },
          on: {
            SPEECH_START: { target: '.hearing', actions: 'callerSpoke' },
            SPEECH_STOP: { target: '.quiet', reenter: true },
            TURN: [
              { guard: ({ context }) => context.greetingOwed, target: 'responding', actions: assign({ greetingOwed: false, request: ({ context, event }) => ({ kind: 'greeting' as const, text: context.greeting!, after: event.text }) }) },
              { target: 'responding', actions: assign({ request: ({ event }) => ({ kind: 'turn' as const, text: event.text }) }) },
            ],
          },
        },
        responding: {
          invoke: { src: 'respond', input: ({ context }) => context.request! },
          initial: 'thinking',
          states: {
            thinking: { on: { RESPONSE_AUDIO: 'speaking' } },
            speaking: {},
          },
          on: {
            RESPONSE_DONE: [
              { guard: 'ends', target: 'hanging_up', actions: assign({ ending: ({ event }) => (event.type === 'RESPONSE_DONE' ? event.outcome.end! : 'ended') }) },
              { target: 'listening' },
            ],
            RESPONSE_FAILED: { target: '#call.failed', actions: assign({ failure: ({ event }) => event.reason }) },
            INTERRUPT: 'listening',
            TURN: { target: 'responding', reenter: true, actions: assign({ request: ({ event }) => ({ kind: 'turn' as const, text: event.text }) }) },
          },
        },
        away: {
          entry: assign({ request: { kind: 'reengage' } }),
          initial: 'reengaging',
          states: {
            reengaging: {
              invoke: { src: 'respond', input: ({ context }) => context.request! },
              on: {
                RESPONSE_DONE: { target: 'waiting', actions: assign({ reengaged: true }) },
                RESPONSE_FAILED: { target: '#call.failed', actions: assign({ failure: ({ event }) => event.reason }) },
                INTERRUPT: '#call.in-progress.listening',
              },
            },
            waiting: {
              after: { silence: { target: '#call.in-progress.away', reenter: true } },
              on: { SPEECH_START: { target: '#call.in-progress.listening.hearing', actions: 'callerSpoke' } },
            },
          },
          // While the re-engagement is spoken, the caller's sound goes through the barge-in rules
          // (INTERRUPT) like any other speech of the agent's, so a cough does not cut it off.
          on: {
            TURN: { target: 'responding', actions: assign({ request: ({ event }) => ({ kind: 'turn' as const, text: event.text }) }) },
          },
        },
        voicemail: {
          initial: 'waiting_for_beep',
          states: {
            waiting_for_beep: {
              after: { beep: 'leaving_message' },
              on: { SPEECH_STOP: 'leaving_message', TURN: 'leaving_message' },
            },
            leaving_message: {
              invoke: { src: 'respond', input: ({ context }) => context.request! },
              on: { RESPONSE_DONE: '#call.in-progress.hanging_up', RESPONSE_FAILED: '#call.in-progress.hanging_up' },
            },
          },
        },
        closing: {
          invoke: { src: 'respond', input: ({ context }) => context.request! },
          after: { goodbye: 'hanging_up' },
          on: { RESPONSE_DONE: 'hanging_up', RESPONSE_FAILED: 'hanging_up', END: {}, INTERRUPT: {}, TURN: {} },
        },
        hanging_up: {
          always: [
            { guard: ({ context }) => context.ending === 'ended_by_assistant', target: '#call.ended_by_assistant' },
            { guard: ({ context }) => context.ending === 'completed', target: '#call.completed' },
            { guard: ({ context }) => context.ending === 'ended_by_customer', target: '#call.ended_by_customer' },
            { target: '#call.ended' },
          ],
        },
      },
    },
    busy: { type: 'final' },
    'no-answer': { type: 'final' },
    failed: { type: 'final' },
    completed: { type: 'final' },
    ended_by_customer: { type: 'final' },
    ended_by_assistant: { type: 'final' },
    ended: { type: 'final' },
  },
});

export type CallMachine = typeof callMachine;
