import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { median } from './report.js';
import type { StandaloneSection } from './standalone.js';

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const GF = join(ROOT, 'client/dist/gf.js');

/** Runs of each command (after warm-up runs of each, so both read from the page cache). */
const RUNS = Number(process.env.BENCH_GF_RUNS ?? 30);
const WARMUP = 3;
const TARGET_MS = 150;
const ms = (x: number) => x.toFixed(1);

/**
 * `gf --version` from the compiled package (`client/dist/gf.js`, built here with `npm run build
 * -w client`, the files `npm pack` ships) beside `node -e 0`, each a fresh process timed from
 * spawn to exit, alternating; target: at most 150 ms more at the median. The environment has no
 * NODE_OPTIONS, as on a customer's machine (`npm run` sets the repository's source condition).
 */
export const clientColdStartSection: StandaloneSection = {
  name: 'gf cold start',
  run: async (log) => {
    const built = performance.now();
    await run('npm', ['run', 'build', '-w', 'client'], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
    log(`client built in ${((performance.now() - built) / 1000).toFixed(1)} s`);

    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'NODE_OPTIONS'));
    const timed = async (args: string[]): Promise<{ ms: number; stdout: string }> => {
      const start = performance.now();
      const { stdout } = await run(process.execPath, args, { env });
      return { ms: performance.now() - start, stdout };
    };
    const gfArgs = [GF, '--version'];
    const nodeArgs = ['-e', '0'];
    const version = (await timed(gfArgs)).stdout.trim();
    for (let i = 0; i < WARMUP; i++) {
      await timed(nodeArgs);
      await timed(gfArgs);
    }
    const gf: number[] = [];
    const node: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      node.push((await timed(nodeArgs)).ms);
      gf.push((await timed(gfArgs)).ms);
    }
    const difference = median(gf) - median(node);
    log(`gf --version printed ${version}; ${RUNS} runs each, min gf ${ms(Math.min(...gf))} ms, node ${ms(Math.min(...node))} ms`);

    const row = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(44) : c.padStart(12))).join('  ');
    const met = difference <= TARGET_MS;
    const table = [
      row(['measure', 'median', 'baseline', 'difference', 'target', 'result']),
      row(['gf --version, ms (baseline: node -e 0)', ms(median(gf)), ms(median(node)), `${difference >= 0 ? '+' : ''}${ms(difference)}`, `<= +${TARGET_MS} ms`, met ? 'PASS' : 'FAIL']),
    ];
    return { table, missed: met ? [] : [`gf --version ${ms(difference)} ms over node -e 0 (target <= ${TARGET_MS})`] };
  },
};
