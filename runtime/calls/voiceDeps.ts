import type { CampaignAttempt } from '../campaigns/dialling.js';
import type { Carriers } from './carriers/index.js';
import type { AnsweredBy, CarrierStatus } from './carriers/types.js';
import type { CallPresenceTimings } from './presence.js';
import type { CallSpecDeps } from './spec.js';
import type { SweepGate } from '../sweeps.js';
import type { CallMode, CallSpec } from '../voice/spec.js';
import type { Logger } from '../logger.js';

/** What the live-call service and its lifecycle are given: the platform's parts a call uses. */

export interface VoiceMetrics {
  voiceToVoice(ms: number): void;
  turn(mode: CallMode): void;
  interruption(mode: CallMode): void;
  resumed(mode: CallMode): void;
  firstByte(kind: 'llm', provider: string, ms: number): void;
  frameLateness(ms: number): void;
  droppedCallerFrame(): void;
}

export interface VoiceDeps extends CallSpecDeps {
  /** The carrier serving each number's calls. */
  readonly carriers: Carriers;
  readonly logger: Logger;
  /** The public origin (PUBLIC_URL), resolved once the server listens. */
  publicUrl(): string;
  /** Where recordings are written (`DATA_DIR/recordings`). */
  readonly recordingsDir: string;
  /** The signed URL of a call's recording (for the webhook payload). */
  recordingUrl(callId: number): string;
  readonly metrics?: VoiceMetrics;
  wakeWebhooks(): void;
  /** Runs the post-call evaluation of an ended call (after its end is saved). */
  evaluate(callId: number): void;
  /** Puts an ended call's transcript in the search index. */
  indexCall(callId: number): Promise<void>;
  /** Waits (by the clock) before each new attempt to save a call's end; the last repeats (tests shorten them). */
  readonly endSaveRetryMs?: readonly number[];
  /** Heartbeats and the sweep of calls left by stopped processes. @defaultValue {@link defaultCallPresence} */
  readonly presence?: CallPresenceTimings;
  /**
   * The database is this process's alone (the embedded one): every call open in it at start-up was
   * left by this process's predecessor, and is settled at once rather than after the orphan age.
   */
  readonly exclusiveDatabase?: boolean;
  /**
   * The database the pool is of: the process listens on it for requests to the calls it holds
   * (a hang-up asked of another process). Without it they are taken at each heartbeat only.
   */
  readonly databaseUrl?: string;
  /** A carrier's status callback, asked of this process by another (the call is held here). */
  carrierStatus?(carrier: string, callId: number, carrierCallId: string, status: CarrierStatus | undefined, answeredBy?: AnsweredBy): void;
  /** Runs the sweep of left calls once per period across processes. */
  readonly sweeps?: SweepGate;
}

/** A call being started: where it comes from, and the carrier its number records (none for a web call). */
export interface NewLiveCall {
  readonly type: CallSpec['type'];
  readonly status: 'initiated' | 'ringing';
  readonly assistantNumber: string | null;
  readonly clientNumber: string | null;
  readonly variables: Record<string, unknown>;
  readonly carrierCallId: string | null;
  readonly carrierName: string | null;
  /** The campaign lead's attempt an outbound call dials: its row is written only while the claim is the dialler's. */
  readonly campaign?: CampaignAttempt;
}
