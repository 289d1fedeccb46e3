import type { DatabaseTransactionConnection, CommonQueryMethods } from 'slonik';
import { releaseHold } from '../ledger/holds.js';
import type { Logger } from '../logger.js';
import { callRate, type CallRate } from '../prices.js';
import { enqueueCallEnded } from '../webhooks/callEnded.js';
import { chargeCall, numberTariff } from './repository.js';
import type { CallMode, CallSpec } from '../voice/spec.js';

/** The price per second of a call: the engine mode's, plus the carrier's for the platform number it uses. */
export async function rateOf(db: CommonQueryMethods, userId: number, mode: CallMode, type: CallSpec['type'], assistantNumber: string | null): Promise<CallRate> {
  const tariff = type === 'web' || assistantNumber === null ? null : await numberTariff(db, userId, assistantNumber);
  return callRate(mode, tariff);
}

/**
 * Charges an ended call, releases its hold on the balance and queues its webhook, inside the
 * transaction that wrote its end, so an ended call never lacks any of them and its cost is never
 * both held and charged. A balance short of the cost is charged what it has (and logged).
 */
export async function chargeEnded(
  tx: DatabaseTransactionConnection,
  logger: Logger,
  call: { userId: number; callId: number; total: number; recordingUrl: string | null; holdMs: number },
): Promise<void> {
  const unpaid = await chargeCall(tx, call.userId, call.callId, call.total);
  if (unpaid > 0) logger.warn({ callId: call.callId, userId: call.userId, unpaid }, 'the balance did not cover the whole call');
  await releaseHold(tx, call.callId);
  await enqueueCallEnded(tx, call.callId, call.recordingUrl, call.holdMs);
}
