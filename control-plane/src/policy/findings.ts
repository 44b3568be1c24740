import type { PolicyFinding } from '@gpufarm/shared';

/**
 * The workload policy's rule ids, as they appear in `policy.findings[].rule`. Stable: clients
 * may branch on them.
 *
 * - `banned_image`: the image is a known miner or password cracker, or on the operator's list.
 * - `mining_signature`: the command or env carries cryptocurrency-mining signatures.
 * - `cracking_signature`: the command or env carries password-cracking signatures.
 * - `privilege_request`: the command, env or image asks for host or container privileges.
 * - `lan_egress`: a `networkPolicy.allow` entry is not a public DNS name.
 */
export const POLICY_RULES = ['banned_image', 'mining_signature', 'cracking_signature', 'privilege_request', 'lan_egress'] as const;
export type PolicyRule = (typeof POLICY_RULES)[number];

/**
 * One piece of evidence found by a rule: the request field it is in and a short phrase that
 * says what was seen (`a mining pool URL "stratum+tcp://…"`).
 */
export interface Signal {
  rule: PolicyRule;
  field: string;
  phrase: string;
}

/** Quotes a request value for a message, shortened so a 4 KiB env value cannot flood it. */
export function quote(text: string, max = 80): string {
  const short = [...text].length > max ? `${[...text].slice(0, max - 1).join('')}…` : text;
  return JSON.stringify(short);
}

/**
 * Turns a rule's signals into findings: one finding per field, in the order of `fieldRank`,
 * its message `<field> <lead>: <phrase>; <phrase>`.
 */
export function findingsOf(rule: PolicyRule, lead: string, signals: readonly Signal[], fieldRank: (field: string) => number): PolicyFinding[] {
  const byField = new Map<string, string[]>();
  for (const signal of signals) {
    if (signal.rule !== rule) continue;
    const phrases = byField.get(signal.field);
    if (phrases === undefined) byField.set(signal.field, [signal.phrase]);
    else if (!phrases.includes(signal.phrase)) phrases.push(signal.phrase);
  }
  return [...byField.entries()]
    .sort(([a], [b]) => fieldRank(a) - fieldRank(b))
    .map(([field, phrases]) => ({ rule, field, message: `${field} ${lead}: ${phrases.join('; ')}` }));
}
