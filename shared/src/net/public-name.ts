import { isIPv4, isIPv6 } from 'node:net';
import { isDnsName } from './dns-name.js';

/**
 * The one definition of "a public DNS name" and "a public address" that the control plane's
 * workload policy (`lan_egress`) and the agent's egress proxy share. Pure, no I/O, but Node only
 * (`node:net`): exported from `@gpufarm/shared/node`; the syntax check `isDnsName` is `dns-name.ts`.
 *
 * - `publicNameProblem(name)`: why an allowlist entry is not a public DNS host name (an IP
 *   literal in any notation, loopback and metadata names, single labels, suffixes that never
 *   resolve publicly, services that resolve to an address spelled in the name), or null.
 * - `addressRange(address)`: why a resolved address must not be reached (private, loopback,
 *   link-local, CGNAT, multicast, reserved, documentation, cloud metadata; IPv4 and IPv6, with
 *   IPv4 embedded in IPv6 judged by its IPv4 part), or null for a public unicast address.
 *
 * A name can pass the first check and still resolve to a private address: the proxy checks
 * every answer with the second before it connects.
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
 * Why `name` is not a public DNS host name, or null when it is one. Case and one trailing dot
 * are ignored. Every IP literal is refused, public or not (an allowlist names hosts); the
 * message says which range it is in.
 *
 * @example publicNameProblem('api.example.com') // null
 * @example publicNameProblem('2130706433') // 'is an IP address literal (127.0.0.1, loopback); …'
 */
export function publicNameProblem(name: string): string | null {
  const host = normalizeHost(name);
  const literal = ipLiteralDescription(host);
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

/** Whether `name` is a public DNS host name (see `publicNameProblem`). */
export function isPublicDnsName(name: string): boolean {
  return publicNameProblem(name) === null;
}

/** Lower case, without one trailing dot: the form names are compared in. */
export function normalizeHost(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

/**
 * Whether `host` is an IP literal in any form a URL parser or `inet_aton` accepts: dotted IPv4,
 * shortened (`127.1`), octal or hex parts, a single number, IPv6 with or without brackets or a
 * zone. The rule is WHATWG's: a host whose last label is a number is an IPv4 address (valid or not).
 */
export function isIpLiteral(host: string): boolean {
  const bare = stripBrackets(normalizeHost(host));
  if (bare.includes(':')) return isIPv6(bare.replace(/%.*$/, ''));
  return lastLabelIsNumber(bare);
}

/**
 * Why a resolved address must not be reached, or null for a public unicast address. Takes the
 * canonical text `dns.lookup` returns (`10.0.0.5`, `fd00::1`, `::ffff:127.0.0.1`).
 *
 * @example addressRange('10.1.2.3') // 'private network 10.0.0.0/8'
 * @example addressRange('93.184.216.34') // null
 * @example addressRange('not an address') // 'not an IP address'
 */
export function addressRange(address: string): string | null {
  const bare = stripBrackets(address).replace(/%.*$/, '');
  if (isIPv4(bare)) return ipv4Range(parseIpv4(bare.split('.')) ?? 0);
  if (isIPv6(bare)) {
    const groups = ipv6Groups(bare);
    return groups === null ? 'not an IP address' : ipv6Range(groups);
  }
  return 'not an IP address';
}

/**
 * Whether `address` lies in `cidr` (`172.18.0.0/16`, `2001:db8::/64`). An IPv4-mapped IPv6
 * address (`::ffff:10.0.0.1`) is judged as its IPv4 address; otherwise families never match.
 *
 * @example inCidr('172.18.0.3', '172.18.0.0/16') // true
 * @example inCidr('::ffff:11.0.0.9', '11.0.0.0/24') // true
 */
export function inCidr(address: string, cidr: string): boolean {
  const slash = cidr.lastIndexOf('/');
  const bits = Number(cidr.slice(slash + 1));
  const a = addressBits(stripBrackets(address).replace(/%.*$/, ''));
  const base = slash < 0 ? null : addressBits(cidr.slice(0, slash));
  if (a === null || base === null || a.length !== base.length || !Number.isInteger(bits) || bits < 0 || bits > base.length * 16) return false;
  return a.every((group, i) => ((group ^ base[i]!) & prefixMask(bits - i * 16)) === 0);
}

/**
 * The network of `address` with a `bits`-long prefix, as a CIDR (`203.0.113.0/24`,
 * `2001:db8:1:2:0:0:0:0/64`), or null when `address` is not an IP address.
 */
export function networkCidr(address: string, bits: number): string | null {
  const groups = addressBits(stripBrackets(address).replace(/%.*$/, ''));
  if (groups === null || !Number.isInteger(bits) || bits < 0 || bits > groups.length * 16) return null;
  const masked = groups.map((g, i) => g & prefixMask(bits - i * 16));
  const text = masked.length === 2 ? formatIpv4(masked[0]! * 65536 + masked[1]!) : masked.map((g) => g.toString(16)).join(':');
  return `${text}/${bits}`;
}

/** The mask of a 16-bit group that keeps its first `bits` bits (clamped to 0-16). */
function prefixMask(bits: number): number {
  const take = Math.max(0, Math.min(16, bits));
  return take === 0 ? 0 : (0xffff << (16 - take)) & 0xffff;
}

/** An address as 16-bit groups: 2 for IPv4 (and IPv4-mapped IPv6), 8 for IPv6; null when it is none. */
function addressBits(address: string): number[] | null {
  if (isIPv4(address)) {
    const value = parseIpv4(address.split('.'));
    return value === null ? null : [Math.floor(value / 65536), value % 65536];
  }
  if (!isIPv6(address)) return null;
  const g = ipv6Groups(address);
  if (g === null) return null;
  return g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff ? [g[6]!, g[7]!] : g;
}

// ---------------------------------------------------------------------------------------------
// IPv4
// ---------------------------------------------------------------------------------------------

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function lastLabelIsNumber(host: string): boolean {
  const labels = host.split('.');
  return /^(?:[0-9]+|0x[0-9a-f]*)$/.test(labels[labels.length - 1] ?? '');
}

/** A description of the IP literal `host` (`10.0.0.5, private network 10.0.0.0/8`), or null. */
function ipLiteralDescription(host: string): string | null {
  const bare = stripBrackets(host);
  if (bare.includes(':')) {
    const address = bare.replace(/%.*$/, '');
    if (!isIPv6(address)) return null;
    const groups = ipv6Groups(address);
    return groups === null ? address : `${address}, ${ipv6Range(groups) ?? 'a public address'}`;
  }
  if (!lastLabelIsNumber(host)) return null;
  const value = parseIpv4(host.split('.'));
  if (value === null) return 'a numeric host that is not a valid IPv4 address';
  return `${formatIpv4(value)}, ${ipv4Range(value) ?? 'a public address'}`;
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

/** IPv4 ranges that are not public unicast; the first that contains the address wins. */
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
  { base: '192.0.2.0', bits: 24, what: 'documentation 192.0.2.0/24' },
  { base: '192.88.99.0', bits: 24, what: 'reserved 6to4 relays 192.88.99.0/24' },
  { base: '192.168.0.0', bits: 16, what: 'private network 192.168.0.0/16' },
  { base: '198.18.0.0', bits: 15, what: 'benchmarking network 198.18.0.0/15' },
  { base: '198.51.100.0', bits: 24, what: 'documentation 198.51.100.0/24' },
  { base: '203.0.113.0', bits: 24, what: 'documentation 203.0.113.0/24' },
  { base: '224.0.0.0', bits: 4, what: 'multicast' },
  { base: '240.0.0.0', bits: 4, what: 'reserved 240.0.0.0/4' },
];

const IPV4_TABLE = IPV4_RANGES.map((r) => ({ base: parseIpv4(r.base.split('.')) ?? 0, size: 2 ** (32 - r.bits), what: r.what }));

function ipv4Range(value: number): string | null {
  for (const range of IPV4_TABLE) {
    if (value >= range.base && value < range.base + range.size) return range.what;
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// IPv6
// ---------------------------------------------------------------------------------------------

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

/** The IPv4 address in groups `hi` and `lo`, judged as IPv4 (`IPv4-mapped 127.0.0.1, loopback`). */
function embeddedIpv4(kind: string, hi: number, lo: number): string {
  const value = hi * 65536 + lo;
  return `${kind} ${formatIpv4(value)}, ${ipv4Range(value) ?? 'a public address'}`;
}

function ipv6Range(g: readonly number[]): string | null {
  const [g0 = 0, g1 = 0, g2 = 0, , , g5 = 0, g6 = 0, g7 = 0] = g;
  const zeroUpTo = (n: number) => g.slice(0, n).every((x) => x === 0);
  if (zeroUpTo(7) && g7 === 1) return 'loopback';
  if (zeroUpTo(8)) return 'the unspecified address';
  if (zeroUpTo(5) && g5 === 0xffff) {
    // IPv4-mapped: reaches the IPv4 address; public only if that one is.
    return ipv4Range(g6 * 65536 + g7) === null ? null : embeddedIpv4('IPv4-mapped', g6, g7);
  }
  if (zeroUpTo(6)) return 'IPv4-compatible ::/96 (deprecated)';
  if (g0 === 0xfd00 && g1 === 0x0ec2 && g.slice(2, 7).every((x) => x === 0) && g7 === 0x254) return 'the cloud metadata address';
  if (g0 === 0x0064 && g1 === 0xff9b && g2 === 0 && g.slice(3, 6).every((x) => x === 0)) {
    // NAT64 well-known prefix: reaches the embedded IPv4 address.
    return ipv4Range(g6 * 65536 + g7) === null ? null : embeddedIpv4('NAT64', g6, g7);
  }
  if (g0 === 0x0064 && g1 === 0xff9b && g2 === 1) return 'local-use NAT64 64:ff9b:1::/48';
  if (g0 === 0x2002) {
    // 6to4 reaches the IPv4 address in groups 1 and 2.
    return ipv4Range(g1 * 65536 + g2) === null ? null : embeddedIpv4('6to4', g1, g2);
  }
  if (g0 === 0x2001 && g1 === 0x0db8) return 'documentation 2001:db8::/32';
  if ((g0 & 0xfff0) === 0x3ff0) return 'documentation 3fff::/20';
  if (g0 === 0x2001 && g1 < 0x0200) return 'IETF protocol assignments 2001::/23 (Teredo, benchmarking, ORCHID)';
  if ((g0 & 0xfe00) === 0xfc00) return 'unique local (private) fc00::/7';
  if ((g0 & 0xffc0) === 0xfe80) return 'link-local fe80::/10';
  if ((g0 & 0xffc0) === 0xfec0) return 'site-local fec0::/10 (deprecated, private)';
  if ((g0 & 0xff00) === 0xff00) return 'multicast';
  if ((g0 & 0xe000) !== 0x2000) return 'reserved (outside global unicast 2000::/3)';
  return null;
}
