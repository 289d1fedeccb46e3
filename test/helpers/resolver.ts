import { isIP } from 'node:net';
import type { HostLookup } from '../../runtime/net/outbound.js';

export interface FakeResolver extends HostLookup {
  /** Names and their addresses, changeable while a test runs; `never` does not answer. A name not here does not resolve. */
  readonly answers: Record<string, string[] | 'never'>;
  /** Every name asked, in order. */
  readonly asked: string[];
}

/** A stand-in for DNS, for names a test invents (the outbound guard's `lookup`). */
export function fakeResolver(answers: Record<string, string[] | 'never'> = {}): FakeResolver {
  const asked: string[] = [];
  const lookup = async (host: string) => {
    asked.push(host);
    const answer = answers[host];
    if (answer === 'never') return new Promise<never>(() => undefined);
    if (!answer) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return answer.map((address) => ({ address, family: isIP(address) }));
  };
  return Object.assign(lookup, { answers, asked });
}
