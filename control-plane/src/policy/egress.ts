import { publicNameProblem } from '@gpufarm/shared/node';
import { quote, type Signal } from './findings.js';

/**
 * The `lan_egress` rule: an allowlist may name public DNS host names only. The definition is
 * shared with the agent's egress proxy (`publicNameProblem` in `shared/src/net/public-name.ts`).
 * Refused, each as a finding on `networkPolicy.allow[i]`:
 * - IP literals in any form a URL parser or `inet_aton` accepts: dotted IPv4, shortened
 *   (`127.1`), octal or hex parts (`0x7f.0.0.1`, `127.0x1`), a single decimal or hex number
 *   (`2130706433`, `0x7f000001`), IPv6 with or without brackets. Every literal is refused,
 *   public or not (the spec asks for DNS names); the message says which range it is in.
 * - loopback and metadata names (`localhost`, `*.localhost`, `metadata`, `instance-data`,
 *   `metadata.google.internal`, …), single-label names (`db`, resolved through search domains),
 *   and names under suffixes that never resolve publicly (`.local`, `.internal`, `.lan`,
 *   `.home.arpa`, `.corp`, `.intranet`, `.private`, the RFC 6761 special-use names, …);
 * - wildcard DNS services that answer any IP chosen in the name (`10.0.0.5.nip.io`, `lvh.me`).
 *
 * Not caught here: a public name whose DNS record points at a private address. The egress proxy
 * checks every resolved address at connect time (`addressRange`); this rule keeps obvious LAN
 * names out of accepted jobs.
 */

/**
 * Why `name`, an allowlist entry, is not a public DNS name, or null when it is one. Case and one
 * trailing dot are ignored.
 *
 * @example lanEgressReason('api.example.com') // null
 * @example lanEgressReason('2130706433') // 'is an IP address literal (127.0.0.1, loopback); …'
 */
export function lanEgressReason(name: string): string | null {
  return publicNameProblem(name);
}

/** One `lan_egress` signal per allowlist entry that is not a public DNS name. */
export function egressSignals(allow: readonly string[]): Signal[] {
  const signals: Signal[] = [];
  allow.forEach((name, i) => {
    const reason = lanEgressReason(name);
    if (reason !== null) signals.push({ rule: 'lan_egress', field: `networkPolicy.allow[${i}]`, phrase: `${quote(name)} ${reason}` });
  });
  return signals;
}
