import { isIPv6 } from 'node:net';
import { isDnsName } from '@gpufarm/shared';
import { quote, type Signal } from './findings.js';

/**
 * The `lan_egress` rule: an allowlist may name public DNS host names only. Refused, each as a
 * finding on `networkPolicy.allow[i]`:
 * - IP literals in any form a URL parser or `inet_aton` accepts: dotted IPv4, shortened
 *   (`127.1`), octal or hex parts (`0x7f.0.0.1`, `127.0x1`), a single decimal or hex number
 *   (`2130706433`, `0x7f000001`), IPv6 with or without brackets. The rule is WHATWG's: a host
 *   whose last label is a number is an IPv4 address. Every literal is refused, public or not
 *   (the spec asks for DNS names); the message says which range it is in.
 * - loopback and metadata names (`localhost`, `*.localhost`, `metadata`, `instance-data`,
 *   `metadata.google.internal`, …), single-label names (`db`, resolved through search domains),
 *   and names under suffixes that never resolve publicly (`.local`, `.internal`, `.lan`,
 *   `.home.arpa`, `.corp`, `.intranet`, `.private`, the RFC 6761 special-use names, …);
 * - wildcard DNS services that answer any IP chosen in the name (`10.0.0.5.nip.io`, `lvh.me`).
 *
 * Not caught here: a public name whose DNS record points at a private address. The egress proxy
 * must check the resolved address at connect time; this rule only keeps obvious LAN names out.
 */

/** Exact names that reach the machine itself or a cloud metadata service. */
const METADATA_NAMES: ReadonlyMap<string, string> = new Map([
  ['metadata', 'the cloud metadata service'],
  ['metadata.google.internal', 'the cloud metadata service'],
  ['metadata.goog', 'the cloud metadata service'],
  ['instance-data', 'the cloud metadata service'],
  ['instance-data.ec2.internal', 'the cloud metadata service'],
  ['metadata.tencentyun.com', 'the cloud metadata service'],
  ['localhost', 'the loopback interface'],
  ['ip6-localhost', 'the loopback interface'],
  ['ip6-loopback', 'the loopback interface'],
]);

/** Suffixes (matched on whole labels) that are not public DNS, with why. */
const NON_PUBLIC_SUFFIXES: ReadonlyMap<string, string> = new Map([
  ['localhost', 'the loopback interface'],
  ['local', 'multicast DNS on the local network'],
  ['localdomain', 'local networks'],
  ['internal', 'private networks'],
  ['lan', 'private networks'],
  ['home', 'private networks'],
  ['home.arpa', 'home networks'],
  ['corp', 'private networks'],
  ['intranet', 'private networks'],
  ['private', 'private networks'],
  ['svc', 'Kubernetes cluster services'],
  ['arpa', 'reverse DNS and home networks, not hosts'],
  ['test', 'testing (RFC 6761), not public DNS'],
  ['example', 'documentation (RFC 6761), not public DNS'],
  ['invalid', 'invalid names (RFC 6761)'],
  ['alt', 'non-DNS namespaces (RFC 9476)'],
  ['onion', 'Tor onion services, not DNS'],
]);

/** Public services whose names resolve to an address spelled in the name, or to 127.0.0.1. */
const ADDRESS_IN_NAME_SERVICES = [
  'nip.io',
  'sslip.io',
  'xip.io',
  'traefik.me',
  'localtest.me',
  'lvh.me',
  'vcap.me',
  'lacolhost.com',
  'localhost.direct',
  'rbndr.us',
  '1u.ms',
] as const;

/**
 * Why `name`, an allowlist entry, is not a public DNS name, or null when it is one. Case and one
 * trailing dot are ignored.
 *
 * @example lanEgressReason('api.example.com') // null
 * @example lanEgressReason('2130706433') // 'is an IP address literal (127.0.0.1, loopback); …'
 */
export function lanEgressReason(name: string): string | null {
  const host = name.toLowerCase().replace(/\.$/, '');
  const literal = ipLiteralReason(host);
  if (literal !== null) return `is an IP address literal (${literal}); the allowlist takes public DNS names only`;

  const special = METADATA_NAMES.get(host);
  if (special !== undefined) return `names ${special}`;
  if (!host.includes('.')) return 'is a single-label name, which resolves on the local network only';

  for (const [suffix, why] of NON_PUBLIC_SUFFIXES) {
    if (host === suffix || host.endsWith(`.${suffix}`)) return `is under ".${suffix}", which is reserved for ${why}`;
  }
  for (const service of ADDRESS_IN_NAME_SERVICES) {
    if (host === service || host.endsWith(`.${service}`)) {
      return `is under "${service}", a public service that resolves names to any address, private ones included`;
    }
  }
  if (!isDnsName(host)) return 'is not a DNS host name';
  return null;
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

// ---------------------------------------------------------------------------------------------
// IP literals
// ---------------------------------------------------------------------------------------------

/** A description of the IP literal `host` (`10.0.0.5, private network 10.0.0.0/8`), or null. */
function ipLiteralReason(host: string): string | null {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (bare.includes(':')) {
    const address = bare.replace(/%.*$/, '');
    if (!isIPv6(address)) return null;
    const groups = ipv6Groups(address);
    return groups === null ? `${address}` : `${address}, ${describeIpv6(groups)}`;
  }
  const labels = host.split('.');
  const last = labels[labels.length - 1] ?? '';
  if (!/^(?:[0-9]+|0x[0-9a-f]*)$/.test(last)) return null;
  const value = parseIpv4(labels);
  if (value === null) return 'a numeric host that is not a valid IPv4 address';
  return `${formatIpv4(value)}, ${describeIpv4(value)}`;
}

/** Parses IPv4 the way URL parsers and inet_aton do: 1 to 4 parts, decimal, 0x-hex or 0-octal. */
function parseIpv4(labels: readonly string[]): number | null {
  if (labels.length > 4) return null;
  const numbers: number[] = [];
  for (const label of labels) {
    const n = parseIpv4Part(label);
    if (n === null) return null;
    numbers.push(n);
  }
  const last = numbers.pop() ?? 0;
  if (numbers.some((n) => n > 255) || last >= 256 ** (4 - numbers.length)) return null;
  return numbers.reduce((sum, n, i) => sum + n * 256 ** (3 - i), 0) + last;
}

function parseIpv4Part(part: string): number | null {
  let digits = part;
  let radix = 10;
  if (/^0x/.test(part)) {
    digits = part.slice(2);
    radix = 16;
    if (digits === '') return 0;
  } else if (part.length > 1 && part.startsWith('0')) {
    digits = part.slice(1);
    radix = 8;
  }
  const valid = radix === 16 ? /^[0-9a-f]+$/ : radix === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
  if (!valid.test(digits)) return null;
  const significant = digits.replace(/^0+(?=.)/, '');
  // 2^32 has at most 11 digits in any of the radixes; longer parts are invalid, not truncated.
  return significant.length > 12 ? null : parseInt(significant, radix);
}

function formatIpv4(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.');
}

/** IPv4 ranges worth naming; the first that contains the address wins. */
const IPV4_RANGES: readonly { base: string; bits: number; what: string }[] = [
  { base: '169.254.169.254', bits: 32, what: 'the cloud metadata address' },
  { base: '100.100.100.200', bits: 32, what: 'a cloud metadata address' },
  { base: '0.0.0.0', bits: 8, what: '"this network" 0.0.0.0/8, which reaches the machine itself' },
  { base: '10.0.0.0', bits: 8, what: 'private network 10.0.0.0/8' },
  { base: '100.64.0.0', bits: 10, what: 'carrier-grade NAT 100.64.0.0/10' },
  { base: '127.0.0.0', bits: 8, what: 'loopback' },
  { base: '169.254.0.0', bits: 16, what: 'link-local 169.254.0.0/16' },
  { base: '172.16.0.0', bits: 12, what: 'private network 172.16.0.0/12' },
  { base: '192.0.0.0', bits: 24, what: 'IETF protocol assignments 192.0.0.0/24' },
  { base: '192.168.0.0', bits: 16, what: 'private network 192.168.0.0/16' },
  { base: '198.18.0.0', bits: 15, what: 'benchmarking network 198.18.0.0/15' },
  { base: '224.0.0.0', bits: 4, what: 'multicast' },
  { base: '240.0.0.0', bits: 4, what: 'reserved 240.0.0.0/4' },
];

function describeIpv4(value: number): string {
  for (const range of IPV4_RANGES) {
    const base = parseIpv4(range.base.split('.')) ?? 0;
    const size = 2 ** (32 - range.bits);
    if (value >= base && value < base + size) return range.what;
  }
  return 'a public address';
}

/** The eight 16-bit groups of a valid IPv6 address (an embedded IPv4 tail is folded in). */
function ipv6Groups(address: string): number[] | null {
  let text = address.toLowerCase();
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1] !== undefined) {
    const value = parseIpv4(v4[1].split('.'));
    if (value === null) return null;
    text = `${text.slice(0, -v4[1].length)}${Math.floor(value / 65536).toString(16)}:${(value % 65536).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  if (tail === undefined) return left.length === 8 ? left : null;
  const right = parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function describeIpv6(g: readonly number[]): string {
  const [g0 = 0, , , , , g5 = 0, g6 = 0, g7 = 0] = g;
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(7) && g7 === 1) return 'loopback';
  if (zeroUpTo(8)) return 'the unspecified address';
  if (zeroUpTo(5) && g5 === 0xffff) return `IPv4-mapped ${formatIpv4(g6 * 65536 + g7)}, ${describeIpv4(g6 * 65536 + g7)}`;
  if (g0 === 0xfd00 && g[1] === 0x0ec2 && g.slice(2, 7).every((x) => x === 0) && g7 === 0x254) return 'the cloud metadata address';
  if ((g0 & 0xfe00) === 0xfc00) return 'unique local (private) fc00::/7';
  if ((g0 & 0xffc0) === 0xfe80) return 'link-local fe80::/10';
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  return 'a public address';
}
