import { CARRIERS } from '../../../schemas/phoneNumbers.js';
import type { Clock } from '../../clock.js';
import type { Logger } from '../../logger.js';
import { plivoFormat } from '../../voice/serializers/plivo.js';
import { telnyxFormat } from '../../voice/serializers/telnyx.js';
import { twilioFormat } from '../../voice/serializers/twilio.js';
import type { MediaFormat } from '../../voice/serializers/types.js';
import { vonageFormat } from '../../voice/serializers/vonage.js';
import { createLoopbackCarrier, type LoopbackCarrier, type LoopbackStatusSink } from './loopback.js';
import { loopbackCallee } from './loopbackCallee.js';
import { createPlivoCarrier, type PlivoSettings } from './plivo.js';
import { createTelnyxCarrier, type TelnyxSettings } from './telnyx.js';
import { createTwilioCarrier, type TwilioSettings } from './twilio.js';
import { createVonageCarrier, type VonageSettings } from './vonage.js';
import type { Carrier } from './types.js';

/**
 * The carriers of this platform, by the name phone numbers record. A number's carrier serves its
 * calls when its credentials are configured; otherwise the loopback carrier stands in (a local
 * simulated callee answers, or not, by the number dialled: `loopbackCallee.ts`; logged once per
 * carrier), so `npm start` places calls with no account.
 */

/** Every carrier a phone number may record, in the order the default is chosen from. */
export const CARRIER_NAMES = CARRIERS;
export type CarrierName = (typeof CARRIERS)[number];

export interface CarrierSettings {
  readonly twilio?: TwilioSettings;
  readonly telnyx?: TelnyxSettings;
  readonly vonage?: VonageSettings;
  readonly plivo?: PlivoSettings;
}

/** Each carrier's media format, whether or not its credentials are configured. */
const FORMATS: Readonly<Record<CarrierName, MediaFormat>> = { twilio: twilioFormat, telnyx: telnyxFormat, vonage: vonageFormat, plivo: plivoFormat };

export interface Carriers {
  /** The carrier that serves a number recorded as `name`. */
  of(name: string): Carrier;
  /** The carriers with credentials configured. */
  readonly configured: readonly CarrierName[];
  /** What a number bought without saying gets: the first configured carrier, else `twilio`. */
  readonly defaultName: CarrierName;
  /** The media formats to open sockets for (every carrier's, configured or not: a stream needs a call's token anyway). */
  readonly formats: readonly MediaFormat[];
  /**
   * Where the loopback carrier reports the statuses of its calls (the voice service's
   * `carrierStatus`, as a real carrier's status callback reaches it); set once that service exists.
   */
  reportStatusesTo(sink: LoopbackStatusSink): void;
}

/** `clock`: the calls' clock, which paces the loopback carrier's simulated callee. */
export function createCarriers(settings: CarrierSettings, logger: Logger, clock: Clock, override?: Carrier): Carriers {
  const real = new Map<string, Carrier>();
  if (settings.twilio) real.set('twilio', createTwilioCarrier(settings.twilio));
  if (settings.telnyx) real.set('telnyx', createTelnyxCarrier(settings.telnyx));
  if (settings.vonage) real.set('vonage', createVonageCarrier(settings.vonage));
  if (settings.plivo) real.set('plivo', createPlivoCarrier(settings.plivo));
  const loopback = override ?? createLoopbackCarrier(loopbackCallee(clock), logger);
  const warned = new Set<string>();
  const configured = CARRIER_NAMES.filter((name) => real.has(name));
  const formats = new Map<string, MediaFormat>();
  for (const format of [...Object.values(FORMATS), loopback.format]) formats.set(format.path, format);
  return {
    of(name) {
      if (override) return override;
      const carrier = real.get(name);
      if (carrier) return carrier;
      if (!warned.has(name)) {
        warned.add(name);
        logger.warn({ carrier: name }, 'carrier not configured; the loopback carrier stands in (a local simulated phone answers its outbound calls)');
      }
      return loopback;
    },
    configured,
    defaultName: configured[0] ?? 'twilio',
    formats: [...formats.values()],
    reportStatusesTo(sink) {
      // An override that is no loopback carrier reports nothing this way.
      if ('reportStatusesTo' in loopback) (loopback as LoopbackCarrier).reportStatusesTo(sink);
    },
  };
}
