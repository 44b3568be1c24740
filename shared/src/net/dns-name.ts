/**
 * The syntax of a DNS host name, without Node: the job schema checks allowlist entries with it in
 * the browser too. Whether a name is public is `net/public-name.ts`'s check (Node only, it needs
 * `node:net`), exported from `@gpufarm/shared/node`.
 */

const DNS_NAME = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/i;

/**
 * A fully qualified DNS host name as written in an allowlist: at least two labels, letters,
 * digits and inner hyphens (IDNs in their `xn--` form), no trailing dot, no wildcard, and a
 * top-level label that is not all digits (so IPv4 literals are refused). Whether the name is
 * public (not LAN, not metadata) is `publicNameProblem`'s check.
 */
export function isDnsName(name: string): boolean {
  if (!DNS_NAME.test(name)) return false;
  const tld = name.slice(name.lastIndexOf('.') + 1);
  return !/^[0-9]+$/.test(tld);
}
