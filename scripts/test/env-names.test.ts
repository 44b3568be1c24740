import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { ROOT } from '../src/docs.js';
import { scriptsEnv, ScriptsEnvError } from '../src/env.js';

/**
 * Every `GF_*` variable a program reads goes through a zod schema: a source scan finds the reads
 * (`process.env.GF_X`, `env.GF_X`, `env['GF_X']`, `{ GF_X } = process.env`, `process.env[name]`)
 * and allows them only in the files that hold the schemas. Tests and their helpers are not
 * scanned: what they read is a knob of the test run (`GF_E2E_VERBOSE`) or what they set for the
 * processes they start.
 */

/** The files where a `GF_*` read meets its schema. */
const SCHEMA_FILES = new Map<string, string>([
  ['control-plane/src/config.ts', "the control plane's envSchema"],
  ['agent/src/config/config.ts', "the agent's agentConfigSchema (GF_AGENT_*; GF_AGENT_CONFIG names its file)"],
  ['scripts/src/env.ts', "the scripts' scriptsEnvSchema"],
  ['web/vite.config.ts', "the dev server's GF_ENDPOINT, parsed where it is read"],
]);

/** Source folders of the programs (their tests excluded), and loose source files. */
const SOURCE_DIRS = ['agent/src', 'client/src', 'control-plane/src', 'shared/src', 'scripts/src', 'web/src'];
const SOURCE_FILES = ['web/vite.config.ts', 'agent/build.ts', 'client/build.ts', 'control-plane/build.ts'];

export interface EnvRead {
  line: number;
  text: string;
}

const READS = [
  // process.env.GF_X, env.GF_X, options.env?.GF_X, unless only assigned (`= x`, not `==`).
  /\benv(?:\?\.|\.)GF_[A-Z0-9_]+\b(?!\s*=(?!=))/g,
  /\benv\[\s*['"`]GF_[A-Z0-9_]+['"`]\s*\](?!\s*=(?!=))/g,
  /\{[^{}]*\bGF_[A-Z0-9_]+\b[^{}]*\}\s*=\s*(?:process\.)?env\b/g,
];
/**
 * A name held in a variable, in a file that spells a `GF_*` name in a string: it may be one. (The
 * bench's `process.env[name]` helpers read `BENCH_*` names; the egress proxy's entry point reads
 * GF_EGRESS_CONFIG through a constant of another file: the agent's hand-off to the container it
 * starts, JSON parsed by egressProxyConfigSchema, not a setting.)
 */
const COMPUTED_READ = /\bprocess\.env\[\s*(?!['"`])[^\]]+\]/g;
const GF_STRING = /['"`]GF_[A-Z0-9_]+['"`]/;

/** The environment reads of a source text, comments left out. */
export function envReads(source: string): EnvRead[] {
  const found: EnvRead[] = [];
  const lines = source.split('\n').map((line) => line.replace(/\/\/.*$/, '').replace(/^\s*\*.*$/, '').replace(/\/\*.*?\*\//g, ''));
  const patterns = lines.some((line) => GF_STRING.test(line)) ? [...READS, COMPUTED_READ] : READS;
  lines.forEach((code, index) => {
    for (const pattern of patterns) for (const match of code.matchAll(pattern)) found.push({ line: index + 1, text: match[0] });
  });
  return found;
}

function sourceFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== 'dist') walk(path);
      } else if (/\.(?:ts|tsx|mts|js|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(path);
    }
  };
  for (const dir of SOURCE_DIRS) walk(dir);
  return [...out, ...SOURCE_FILES.filter((f) => { try { return readFileSync(join(ROOT, f)) !== null; } catch { return false; } })];
}

t.test('every GF_* variable is read where its schema is: no program reads one past it', async (t) => {
  const files = sourceFiles();
  t.ok(files.length > 300, `${files.length} source files scanned`);
  const outside = files
    .filter((file) => !SCHEMA_FILES.has(file))
    .flatMap((file) => envReads(readFileSync(join(ROOT, file), 'utf8')).map((r) => `${relative(ROOT, join(ROOT, file))}:${r.line}: ${r.text}`));
  t.same(outside, [], 'no GF_* read outside the schema files (read it through the program\'s schema: scripts/src/env.ts, shared/src/client-settings.ts, …)');
  for (const file of SCHEMA_FILES.keys()) t.ok(files.includes(file), `${file} exists and was scanned`);
});

t.test('the scan sees each way of reading a variable, and not an assignment', async (t) => {
  const reads = (text: string) => envReads(text).map((r) => r.text);
  t.same(reads('const a = process.env.GF_A ?? 1;'), ['env.GF_A']);
  t.same(reads('if (options.env?.GF_B) x();'), ['env?.GF_B']);
  t.same(reads("const c = env['GF_C'];"), ["env['GF_C']"]);
  t.same(reads('const { GF_D, HOME } = process.env;'), ['{ GF_D, HOME } = process.env']);
  t.same(reads("const NAME = 'GF_E';\nconst e = process.env[NAME];"), ['process.env[NAME]']);
  t.same(reads('const e = process.env[name];'), [], 'a computed name is a GF_* one only where the file spells one');
  t.same(reads('process.env.GF_F ||= "x";'), ['env.GF_F']);
  t.same(reads('process.env.GF_G = "x"; if (process.env.GF_H === "1") y();'), ['env.GF_H']);
  t.same(reads('// process.env.GF_I in a comment\n * env.GF_J in a doc comment'), []);
  t.same(reads("const h = process.env.HOME; const o = { GF_K: 'x' };"), []);
});

t.test("the scripts' settings are checked: a bad one names itself, a secret is not shown, an empty one is unset", async (t) => {
  t.throws(() => scriptsEnv({ GF_CLUSTER_PORT: 'eighty' }), new ScriptsEnvError('GF_CLUSTER_PORT: Invalid input: expected number, received NaN (got "eighty")'));
  const err = (() => {
    try {
      scriptsEnv({ GF_DEPLOYER_PRIVATE_KEY: '0x1234' });
    } catch (e) {
      return e as Error;
    }
    return null;
  })();
  t.match(err?.message, /^GF_DEPLOYER_PRIVATE_KEY: must be 0x followed by 64 hex digits \(got \[redacted\]\)$/);
  const env = scriptsEnv({ GF_SEED_FLEET: '', GF_LOCAL_AGENT: '0', GF_CANARY_IMAGE: 'r@sha256:x', GF_UNRELATED: 'ignored' });
  t.equal(env.GF_SEED_FLEET, 0);
  t.equal(env.GF_LOCAL_AGENT, false);
  t.equal(env.GF_CANARY_IMAGE, 'r@sha256:x', 'a control-plane setting is passed on as set (its schema checks it)');
  t.notOk('GF_UNRELATED' in env);
});
