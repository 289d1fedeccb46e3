import type { DatabasePool } from 'slonik';
import type { Clock } from '../clock.js';
import { isoTimestamp } from '../time.js';
import type { CallStatus } from '../../schemas/calls.js';
import type { CallEnd, CallSpec, SessionHooks } from '../voice/spec.js';
import { eventHooks, type CallEventLog } from './events.js';
import type { LiveCall } from './registry.js';
import { updateCallStatus } from './repository.js';
import type { VoiceMetrics } from './voiceDeps.js';

/**
 * What a call's session reports, wired to its entry (`entry()`: undefined until it is made): its
 * events, its metrics, its status saved (by `holder`, in order, through `persist`), its end
 * (`finish`), its carrier's transfer, and the audio times its heartbeat reports.
 */
export function callSessionHooks(
  deps: { readonly pool: DatabasePool; readonly clock: Clock; readonly metrics?: VoiceMetrics },
  spec: CallSpec,
  entry: () => LiveCall | undefined,
  events: CallEventLog,
  lifecycle: { persist(call: LiveCall, work: () => Promise<void>): void; finish(call: LiveCall, end: CallEnd): void; readonly holder: string },
): SessionHooks {
  const { pool, clock, metrics } = deps;
  const id = spec.callId;
  const recorded = eventHooks(events, clock);
  return {
    status: (status, at) => {
      recorded.status(status, at);
      const call = entry();
      if (status === 'initiated' || !call) return;
      if (status === 'in-progress') call.lastMediaAt = clock.now();
      if (call.released) return;
      lifecycle.persist(call, () => updateCallStatus(pool, id, lifecycle.holder, status as CallStatus, isoTimestamp(at)));
    },
    ended: (end) => lifecycle.finish(entry()!, end),
    transfer: async (number) => {
      const call = entry()!;
      if (call.carrierCallId && call.carrier) await call.carrier.transfer(call.carrierCallId, number);
    },
    voiceToVoice: (ms) => {
      metrics?.voiceToVoice(ms);
      recorded.voiceToVoice(ms);
    },
    turn: () => metrics?.turn(spec.mode),
    interruption: () => {
      metrics?.interruption(spec.mode);
      recorded.interruption();
    },
    resumed: () => {
      metrics?.resumed(spec.mode);
      recorded.resumed();
    },
    paused: recorded.paused,
    said: recorded.said,
    toolCall: recorded.toolCall,
    firstByte: (kind, provider, ms) => {
      metrics?.firstByte(kind, provider, ms);
      recorded.firstByte(kind, provider, ms);
    },
    agentFrame: (frame) => {
      const call = entry()!;
      call.heardAt = clock.now();
      call.recorder?.agent(frame);
    },
    frameLateness: metrics ? (ms) => metrics.frameLateness(ms) : undefined,
  };
}
