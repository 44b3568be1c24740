import { parseImageReference, parseBannedImagePattern, splitRegistry, type BannedImagePattern, type Repository } from '@gpufarm/shared';
import { quote, type Signal } from './findings.js';

/**
 * The `banned_image` rule.
 *
 * Built-in tools (BUILTIN_BANNED_IMAGES) are matched by name on the repository path, not by
 * substring: a path segment names a tool when, split into words on `-`, `_` and `.`, and with
 * version words (`6`, `v6`) and packaging words (`docker`, `cuda`, `nvidia`, `gpu`,
 * `alpine`, …; PACKAGING_WORDS) left out, its words are exactly the tool's words; the tool's
 * last word may carry a glued version (`hashcat6`). So `xmrig/xmrig:6.21`, `acme/docker-xmrig`,
 * `ghcr.io/x/xmrig-cuda` and `library/hashcat` are refused while `acme/dataminer-etl`,
 * `ml/transformer-miner-analysis` and `acme/t-rex-runner` are not. Every segment of the path
 * counts (the `xmrig/` namespace publishes miners); the registry host does not. Names that are
 * also ordinary words or other software (`john`, `hydra`, `medusa`, `trex`) are banned only in
 * the forms or repositories that mean the cracker (BUILTIN_BANNED_REPOSITORIES).
 *
 * Configured patterns (`bannedImages`) are repository names: `acme/tool` bans exactly that
 * repository, `acme/*` or `acme/tool*` bans every repository whose path starts with the part
 * before `*`. Both sides are normalized: lower case, tag and digest dropped, the `docker.io`
 * host (and its aliases) and a leading `library/` removed. A pattern without a registry host
 * matches the path on any registry (a mirror is the same software); a pattern with a host
 * (`ghcr.io/acme/tool`) matches that registry only.
 */

export type BannedToolKind = 'miner' | 'cracker';

/** Well-known miners and password crackers refused as images (and matched as described above). */
export const BUILTIN_BANNED_IMAGES: readonly { name: string; kind: BannedToolKind }[] = [
  ...[
    'xmrig', 'xmrigcc', 'xmrig-proxy', 'xmr-stak', 'xmr-stak-rx', 'xmrstak', 't-rex', 'nbminer', 'lolminer',
    'phoenixminer', 'gminer', 'teamredminer', 'nanominer', 'cpuminer', 'cpuminer-opt', 'cpuminer-multi',
    'ccminer', 'ethminer', 'bminer', 'srbminer', 'srbminer-multi', 'wildrig', 'wildrig-multi', 'kawpowminer',
    'progpowminer', 'nheqminer', 'cgminer', 'bfgminer', 'sgminer', 'bzminer', 'hellminer', 'onezerominer',
    'claymore', 'minerd', 'z-enemy', 'cryptodredge',
  ].map((name) => ({ name, kind: 'miner' as const })),
  ...[
    'hashcat', 'oclhashcat', 'cudahashcat', 'hashtopolis', 'john-the-ripper', 'johntheripper', 'john-jumbo',
    'thc-hydra', 'ncrack', 'aircrack-ng', 'cowpatty', 'pyrit',
  ].map((name) => ({ name, kind: 'cracker' as const })),
];

/** Repositories banned as a whole, in the configured-pattern syntax. */
export const BUILTIN_BANNED_REPOSITORIES: readonly { pattern: string; kind: BannedToolKind; tool: string }[] = [
  { pattern: 'openwall/john*', kind: 'cracker', tool: 'John the Ripper' },
  { pattern: 'vanhauser-thc/*', kind: 'cracker', tool: 'THC Hydra' },
  { pattern: 'nicehash/*', kind: 'miner', tool: 'NiceHash' },
];

/** Words that package a tool without changing what it is: `docker-xmrig`, `hashcat-cuda`. */
const PACKAGING_WORDS: ReadonlySet<string> = new Set([
  'docker', 'container', 'image', 'cuda', 'nvidia', 'opencl', 'rocm', 'amd', 'gpu', 'cpu', 'alpine',
  'ubuntu', 'debian', 'static', 'bin', 'latest', 'official',
]);
const VERSION_WORD = /^v?[0-9]+[a-z]?$/;

function matchesPattern(repository: Repository, pattern: BannedImagePattern): boolean {
  if (pattern.registry !== undefined && pattern.registry !== repository.registry) return false;
  return pattern.prefix ? repository.path.startsWith(pattern.path) : repository.path === pattern.path;
}

const toolWords = (name: string) => name.split(/[-_.]+/).filter((w) => w !== '');

/** The built-in tool a path segment names, or null (the rule is in the module comment). */
function toolNamedBy(segment: string): { name: string; kind: BannedToolKind } | null {
  const words = toolWords(segment.toLowerCase()).filter((w) => !VERSION_WORD.test(w) && !PACKAGING_WORDS.has(w));
  if (words.length === 0) return null;
  for (const tool of BUILTIN_BANNED_IMAGES) {
    const wanted = toolWords(tool.name);
    if (wanted.length !== words.length) continue;
    const same = wanted.every((w, i) => {
      const word = words[i] ?? '';
      if (word === w) return true;
      return i === wanted.length - 1 && word.startsWith(w) && VERSION_WORD.test(word.slice(w.length));
    });
    if (same) return tool;
  }
  return null;
}

const builtinPatterns = BUILTIN_BANNED_REPOSITORIES.map((entry) => {
  const pattern = parseBannedImagePattern(entry.pattern);
  if (pattern === null) throw new Error(`invalid built-in ban pattern ${entry.pattern}`);
  return { ...entry, compiled: pattern };
});

const KIND_TEXT: Record<BannedToolKind, string> = { miner: 'a cryptocurrency miner', cracker: 'a password cracker' };

/**
 * The `banned_image` signal for `image`, or none. `patterns` are compiled configured patterns.
 * An image that is not a valid reference gives no signal (the request schema refuses it).
 */
export function bannedImageSignals(image: string, patterns: readonly BannedImagePattern[]): Signal[] {
  const ref = parseImageReference(image);
  if (ref === null) return [];
  const repository = splitRegistry(ref.name);
  const shown = repository.path;
  for (const segment of repository.path.split('/')) {
    const tool = toolNamedBy(segment);
    if (tool !== null) {
      return [{ rule: 'banned_image', field: 'image', phrase: `${quote(image)} is ${tool.name}, ${KIND_TEXT[tool.kind]}` }];
    }
  }
  const builtin = builtinPatterns.find((entry) => matchesPattern(repository, entry.compiled));
  if (builtin !== undefined) {
    return [{ rule: 'banned_image', field: 'image', phrase: `${quote(image)} is ${builtin.tool}, ${KIND_TEXT[builtin.kind]}` }];
  }
  const configured = patterns.find((pattern) => matchesPattern(repository, pattern));
  if (configured !== undefined) {
    return [{ rule: 'banned_image', field: 'image', phrase: `${quote(image)} (repository ${shown}) is on this service's list of banned images (${quote(configured.source.trim())})` }];
  }
  return [];
}
