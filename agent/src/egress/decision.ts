import { addressRange, inCidr, isIpLiteral, normalizeHost, publicNameProblem } from '@gpufarm/shared/node';

/**
 * The egress proxy's rules, pure (no sockets, no DNS): which `CONNECT` targets a job may open
 * and which resolved addresses it may reach. The server (`server.ts`) applies them in order:
 * `decideTarget` on the request, then `checkAnswers` on what the name resolved to, then it
 * connects to an address `checkAnswers` returned, never to the name again (no DNS rebinding).
 */

/** Ports a job may reach when the agent names none: HTTPS and HTTP. */
export const DEFAULT_EGRESS_PORTS: readonly number[] = [443, 80];

/** Why a request was refused; also the `reason` of a refused decision line. */
export type EgressRefusal =
  | 'method'
  | 'bad_target'
  | 'ip_literal'
  | 'not_public'
  | 'not_allowed'
  | 'port'
  | 'private_answer'
  | 'no_answer'
  | 'connections'
  | 'bytes'
  | 'connect_failed';

/** The HTTP status the proxy answers each refusal with. */
export const REFUSAL_STATUS: Readonly<Record<EgressRefusal, number>> = {
  method: 405,
  bad_target: 400,
  ip_literal: 403,
  not_public: 403,
  not_allowed: 403,
  port: 403,
  private_answer: 403,
  no_answer: 502,
  connections: 429,
  bytes: 429,
  connect_failed: 502,
};

/** What the proxy enforces for one job. */
export interface EgressPolicy {
  /** Exact host names, lower case, no trailing dot (the job's `networkPolicy.allow`). */
  allow: readonly string[];
  /** Destination ports allowed (default `DEFAULT_EGRESS_PORTS`). */
  ports: readonly number[];
}

export type TargetDecision =
  | { allowed: true; name: string; port: number }
  | { allowed: false; name: string; port: number | null; reason: EgressRefusal; detail: string };

/**
 * Decides a `CONNECT` authority (`host:port`, `[v6]:port`) against the job's policy. Names are
 * compared exactly after lower-casing and dropping one trailing dot: no wildcards, no
 * subdomains of an allowed name. Order: IP literal, not a public name, not on the list, port.
 *
 * @example decideTarget('api.example.com:443', { allow: ['api.example.com'], ports: [443] }) // { allowed: true, … }
 * @example decideTarget('10.0.0.5:443', policy) // { allowed: false, reason: 'ip_literal', … }
 */
export function decideTarget(authority: string, policy: EgressPolicy): TargetDecision {
  const parsed = parseAuthority(authority);
  if (parsed === null) return { allowed: false, name: authority.slice(0, 255), port: null, reason: 'bad_target', detail: 'the target must be host:port' };
  const { host, port } = parsed;
  const name = normalizeHost(host);
  const refuse = (reason: EgressRefusal, detail: string): TargetDecision => ({ allowed: false, name, port, reason, detail });
  if (isIpLiteral(name)) return refuse('ip_literal', 'IP addresses are refused: name a host on the allowlist');
  const problem = publicNameProblem(name);
  if (problem !== null) return refuse('not_public', `the name ${problem}`);
  if (!policy.allow.some((allowed) => normalizeHost(allowed) === name)) return refuse('not_allowed', 'the name is not on the job\'s allowlist');
  if (!policy.ports.includes(port)) return refuse('port', `port ${port} is not allowed (allowed: ${policy.ports.join(', ')})`);
  return { allowed: true, name, port };
}

/** Splits `host:port`; null when there is no valid port (1-65535) or no host. */
export function parseAuthority(authority: string): { host: string; port: number } | null {
  const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(authority.trim());
  if (!m) return null;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return null;
  return { host: m[1]!, port };
}

export type AnswerDecision = { allowed: true; addresses: string[] } | { allowed: false; reason: 'private_answer' | 'no_answer'; detail: string };

/**
 * Checks every address a name resolved to. One forbidden answer refuses the name (a record
 * that mixes public and private addresses is a rebinding attempt or a misconfiguration, and
 * either way not a public service); no answer is `no_answer`. Forbidden: every range that is not
 * public unicast (`addressRange`), and `ownNetworks`, the machine's own networks (CIDRs of its
 * interfaces) that are public by range: its own addresses and the LAN it sits on.
 *
 * @example checkAnswers(['93.184.216.34']) // { allowed: true, addresses: ['93.184.216.34'] }
 * @example checkAnswers(['10.0.0.5']) // { allowed: false, reason: 'private_answer', … }
 * @example checkAnswers(['203.0.113.7'], ['203.0.113.0/24']) // { allowed: false, reason: 'private_answer', … }
 */
export function checkAnswers(addresses: readonly string[], ownNetworks: readonly string[] = []): AnswerDecision {
  if (addresses.length === 0) return { allowed: false, reason: 'no_answer', detail: 'the name has no address' };
  for (const address of addresses) {
    const range = addressRange(address);
    if (range !== null) return { allowed: false, reason: 'private_answer', detail: `the name resolves to ${address} (${range})` };
    const own = ownNetworks.find((cidr) => inCidr(address, cidr));
    if (own !== undefined) return { allowed: false, reason: 'private_answer', detail: `the name resolves to ${address} (this machine's own network ${own})` };
  }
  return { allowed: true, addresses: [...addresses] };
}
