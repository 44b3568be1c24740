import { formatFieldPath, parseBannedImagePattern, type BannedImagePattern, type JobCreateRequest, type PolicyFinding, type PolicyResult } from '@gpufarm/shared';
import { commandOfValue, commandsOfArgv } from './command-words.js';
import { egressSignals } from './egress.js';
import { findingsOf, POLICY_RULES, type PolicyRule, type Signal } from './findings.js';
import { bannedImageSignals } from './images.js';
import { commandPrivilegeSignals, envPrivilegeSignals, imagePrivilegeSignals, pathPrivilegeSignals } from './privilege.js';
import { signatureSignals } from './signatures.js';

export { POLICY_RULES, type PolicyRule } from './findings.js';
export { lanEgressReason } from './egress.js';
export { parseBannedImagePattern, type BannedImagePattern } from '@gpufarm/shared';
export { BUILTIN_BANNED_IMAGES, BUILTIN_BANNED_REPOSITORIES, type BannedToolKind } from './images.js';
export { CRACKER_PROGRAMS, MINER_PROGRAMS, MINING_POOL_DOMAINS } from './signatures.js';

/** Operator settings of the workload policy. */
export interface PolicyOptions {
  /**
   * Repositories to refuse besides the built-in miners and crackers: `acme/tool` (exactly that
   * repository, on any registry), `ghcr.io/acme/tool` (on that registry), `acme/*` or
   * `acme/tool*` (every repository whose path starts so). Check entries with
   * `parseBannedImagePattern` when loading configuration.
   */
  bannedImages?: readonly string[];
}

/** Opening words of each rule's messages: `<field> <lead>: <evidence>`. */
const LEADS: Record<PolicyRule, string> = {
  banned_image: 'is banned',
  mining_signature: 'looks like cryptocurrency mining',
  cracking_signature: 'looks like password cracking',
  privilege_request: 'asks for host or container privileges',
  lan_egress: 'is not a public DNS name',
};

/**
 * The workload policy: a pure function of the parsed creation request. It looks at `image`,
 * `command`, `env` and, in allowlist mode, `networkPolicy.allow`, and collects every finding
 * (it does not stop at the first). The verdict is `rejected` when there is any finding, which
 * the route answers with 422 `policy_rejected` and the findings; an accepted job carries
 * `{ verdict: 'allowed', findings: [] }`. Each finding is `{ rule, field, message }`: `rule`
 * one of POLICY_RULES, `field` the request path (`image`, `command[3]`, `env.POOL`,
 * `networkPolicy.allow[0]`), `message` starting with that path. Findings come in the order of
 * POLICY_RULES, then of the fields in the request.
 *
 * The rules are documented where they live: images.ts, signatures.ts, privilege.ts, egress.ts.
 *
 * @throws TypeError when an entry of `options.bannedImages` is not a valid pattern.
 * @example evaluatePolicy(request, { bannedImages: ['acme/*'] }) // { verdict: 'allowed', findings: [] }
 */
export function evaluatePolicy(request: JobCreateRequest, options: PolicyOptions = {}): PolicyResult {
  const patterns = compilePatterns(options.bannedImages ?? []);
  const argv = request.command ?? [];
  const env = Object.entries(request.env ?? {}).map(([name, value]) => ({ name, value, field: formatFieldPath(['env', name]) }));
  const strings = [...argv.map((text, i) => ({ text, field: `command[${i}]` })), ...env.map(({ value, field }) => ({ text: value, field }))];
  const commands = [...commandsOfArgv(argv), ...env.map(({ value, field }) => commandOfValue(value, field))];

  const signals: Signal[] = [
    ...bannedImageSignals(request.image, patterns),
    ...signatureSignals({ commands, strings, env }),
    ...imagePrivilegeSignals(request.image),
    ...commandPrivilegeSignals(commands),
    ...strings.flatMap(({ text, field }) => pathPrivilegeSignals(text, field)),
    ...env.flatMap(({ name, field }) => envPrivilegeSignals(name, field)),
    ...(request.networkPolicy?.mode === 'allowlist' ? egressSignals(request.networkPolicy.allow) : []),
  ];

  const rank = fieldRanks(['image', ...strings.map((s) => s.field)]);
  const findings: PolicyFinding[] = POLICY_RULES.flatMap((rule) => findingsOf(rule, LEADS[rule], signals, rank));
  return findings.length === 0 ? { verdict: 'allowed', findings: [] } : { verdict: 'rejected', findings };
}

function compilePatterns(entries: readonly string[]): BannedImagePattern[] {
  return entries.map((entry) => {
    const pattern = parseBannedImagePattern(entry);
    if (pattern === null) throw new TypeError(`bannedImages: ${JSON.stringify(entry)} is not a repository name or a repository prefix ending in "*"`);
    return pattern;
  });
}

/** Orders fields as they appear in the request; allowlist entries by index, after the rest. */
function fieldRanks(fields: readonly string[]): (field: string) => number {
  const ranks = new Map(fields.map((field, i) => [field, i]));
  return (field) => {
    const known = ranks.get(field);
    if (known !== undefined) return known;
    const allow = /^networkPolicy\.allow\[([0-9]+)\]$/.exec(field);
    return allow?.[1] !== undefined ? fields.length + Number(allow[1]) : Number.MAX_SAFE_INTEGER;
  };
}
