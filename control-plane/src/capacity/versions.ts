/**
 * Dotted version strings (CUDA `12.4`, drivers `550.54.15`) as numbers that compare like the
 * versions: `major`, `minor` and `patch` (each 0-65535) packed into one safe integer, plus one
 * so that 0 can stand for "unknown" (a machine that did not report it, or an unreadable string).
 */
const VERSION = /^(\d{1,5})(?:\.(\d{1,5}))?(?:\.(\d{1,5}))?/;

const part = (text: string | undefined) => Math.min(65_535, Number(text ?? 0));
/** A fleet has a handful of distinct versions; each is parsed once. */
const ranks = new Map<string, number>();

/** A machine's reported version as a rank; 0 when null or not a dotted number. */
export function versionRank(version: string | null): number {
  if (version === null) return 0;
  let rank = ranks.get(version);
  if (rank === undefined) {
    const match = VERSION.exec(version.trim());
    rank = match ? (part(match[1]) * 65_536 + part(match[2])) * 65_536 + part(match[3]) + 1 : 0;
    if (ranks.size > 10_000) ranks.clear();
    ranks.set(version, rank);
  }
  return rank;
}

/** A version the client asks for: digits and at most two dots, nothing else. */
export const VERSION_PARAMETER = /^\d{1,5}(?:\.\d{1,5}){0,2}$/;
