import { headings } from './markdown.js';

/**
 * docs/decisions.md as entries: a heading (level 2 or deeper) with text of its own, which begins
 * with its status, `*In force.*`, `*In force since <date>.*` or `*Replaced by [<entry>](#<anchor>).*`.
 * A heading without text only groups the entries under it.
 */
export type DecisionStatus = { kind: 'in force'; since: string | null } | { kind: 'replaced'; by: string; anchor: string };

export interface DecisionHeading {
  level: number;
  text: string;
  slug: string;
  /** null for a heading that only groups entries. */
  status: DecisionStatus | null;
}

const IN_FORCE = /^\*In force(?: since (\d{4}-\d{2}-\d{2}))?\.\*/;
const REPLACED = /^\*Replaced by \[([^\]]+)\]\(#([^)\s]+)\)\.\*/;

/** The headings of the page under its title, each with its status; throws naming every entry without one. */
export function decisionHeadings(markdown: string): DecisionHeading[] {
  const lines = markdown.split('\n');
  const all = headings(markdown);
  const problems: string[] = [];
  const out: DecisionHeading[] = [];
  all.forEach((heading, i) => {
    if (heading.level < 2) return;
    const end = i + 1 < all.length ? all[i + 1]!.line : lines.length;
    const first = lines.slice(heading.line + 1, end).find((line) => line.trim() !== '');
    if (first === undefined) {
      out.push({ level: heading.level, text: heading.text, slug: heading.slug, status: null });
      return;
    }
    const inForce = IN_FORCE.exec(first);
    const replaced = REPLACED.exec(first);
    const status: DecisionStatus | null = inForce ? { kind: 'in force', since: inForce[1] ?? null } : replaced ? { kind: 'replaced', by: replaced[1]!, anchor: replaced[2]! } : null;
    if (status === null) problems.push(`"${heading.text}" (line ${heading.line + 1})`);
    else out.push({ level: heading.level, text: heading.text, slug: heading.slug, status });
  });
  const anchors = new Set(out.map((h) => h.slug));
  for (const h of out) {
    if (h.status?.kind === 'replaced' && !anchors.has(h.status.anchor)) problems.push(`"${h.text}" is replaced by #${h.status.anchor}, which no heading makes`);
  }
  if (problems.length > 0) {
    throw new Error(`docs/decisions.md: an entry begins with its status (*In force.*, *In force since <date>.* or *Replaced by [<entry>](#<anchor>).*): ${problems.join('; ')}`);
  }
  return out;
}

const linked = (text: string, slug: string) => `[${text.replace(/([[\]])/g, '\\$1')}](#${slug})`;

/** The index: one line per heading, nested by level; a replaced entry says by which. */
export function decisionsIndex(markdown: string): string {
  return decisionHeadings(markdown)
    .map((h) => {
      const replaced = h.status?.kind === 'replaced' ? `: replaced by ${linked(h.status.by, h.status.anchor)}` : '';
      return `${'  '.repeat(h.level - 2)}- ${linked(h.text, h.slug)}${replaced}`;
    })
    .join('\n');
}
