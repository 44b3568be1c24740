import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/**
 * Markdown as GitHub shows it, for the docs' own checks: heading anchors, the links of a page,
 * and which of them lead nowhere. Enough of CommonMark for these docs: ATX headings, inline
 * links and images, reference definitions, fenced code (skipped), inline code (skipped).
 */

/** A heading's anchor as GitHub makes it (github-slugger): lower case, punctuation dropped, spaces to dashes. */
export function githubSlug(headingText: string): string {
  return plainHeading(headingText)
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The text GitHub slugs: links and HTML tags rendered away (backticks and `*` are dropped as punctuation). */
function plainHeading(text: string): string {
  return text
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim();
}

/** Lines of `markdown` outside fenced code blocks, with their 0-based numbers. */
function proseLines(markdown: string): Array<{ line: string; index: number }> {
  const out: Array<{ line: string; index: number }> = [];
  let fence: string | null = null;
  markdown.split('\n').forEach((line, index) => {
    const opening = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence !== null) {
      if (opening && opening[1]!.startsWith(fence)) fence = null;
      return;
    }
    if (opening) {
      fence = opening[1]!;
      return;
    }
    out.push({ line, index });
  });
  return out;
}

export interface Heading {
  level: number;
  text: string;
  /** 0-based line of the page. */
  line: number;
  /** Its anchor, with GitHub's `-1`, `-2` suffixes for repeats. */
  slug: string;
}

/** The ATX headings of a page, in order, with their anchors. */
export function headings(markdown: string): Heading[] {
  const seen = new Map<string, number>();
  const out: Heading[] = [];
  for (const { line, index } of proseLines(markdown)) {
    const match = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (!match) continue;
    const base = githubSlug(match[2]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    out.push({ level: match[1]!.length, text: match[2]!, line: index, slug: count === 0 ? base : `${base}-${count}` });
  }
  return out;
}

export interface Link {
  target: string;
  /** 1-based line of the page. */
  line: number;
}

/** The link and image targets of a page (inline and reference definitions), code left out. */
export function links(markdown: string): Link[] {
  const out: Link[] = [];
  for (const { line, index } of proseLines(markdown)) {
    const prose = line.replace(/(`+)(?:(?!\1).)*?\1/g, '');
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: match[1]!, line: index + 1 });
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(prose);
    if (definition) out.push({ target: definition[1]!, line: index + 1 });
  }
  return out;
}

export interface BrokenLink {
  file: string;
  line: number;
  target: string;
  problem: string;
}

/**
 * The links of `files` (paths relative to `root`) that lead nowhere: a relative path that does
 * not exist, or an `#anchor` that no heading of its page makes. URLs with a scheme are not
 * fetched. `confined` maps a folder to itself: links of pages in it must stay in it (a copy of
 * the folder alone is installed elsewhere).
 */
export function brokenLinks(root: string, files: readonly string[], confined: readonly string[] = []): BrokenLink[] {
  const anchors = new Map<string, Set<string>>();
  const anchorsOf = (path: string) => {
    let set = anchors.get(path);
    if (!set) {
      set = new Set(headings(readFileSync(path, 'utf8')).map((h) => h.slug));
      anchors.set(path, set);
    }
    return set;
  };
  const broken: BrokenLink[] = [];
  for (const file of files) {
    const path = join(root, file);
    for (const { target, line } of links(readFileSync(path, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
      const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
      const resolved = pathPart === '' ? path : resolve(dirname(path), pathPart);
      const problem = (() => {
        if (!existsSync(resolved)) return `${relative(root, resolved)} does not exist`;
        const folder = confined.find((c) => file.startsWith(`${c}/`));
        if (folder && !resolved.startsWith(join(root, folder) + sep)) return `pages in ${folder}/ link only inside it (it is installed alone)`;
        if (anchor === null || anchor === '') return null;
        if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) return `#${anchor} points into a file that is not markdown`;
        return anchorsOf(resolved).has(anchor) ? null : `no heading of ${relative(root, resolved)} makes #${anchor}`;
      })();
      if (problem) broken.push({ file, line, target, problem });
    }
  }
  return broken;
}

/** The markdown files under `dir` (relative to `root`), sorted. */
export function markdownFiles(root: string, dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
      const child = `${rel}/${entry.name}`;
      if (entry.isDirectory()) walk(child);
      else if (entry.name.endsWith('.md')) out.push(child);
    }
  };
  walk(dir);
  return out.sort();
}
