import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import type { AssignmentSpec } from '@gpufarm/shared';
import { DockerRuntime, toContainerConfig } from '@gpufarm/agent/runtime';
import { LABEL_OWNER } from '@gpufarm/agent/docker';
import type { StandaloneSection } from './standalone.js';
import { median } from './report.js';

const run = promisify(execFile);
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** Runs of each container measurement (after one warm-up run of each). */
const CONTAINER_RUNS = Number(process.env.BENCH_AGENT_RUNS ?? 15);
const ms = (x: number) => x.toFixed(1);
/** A difference with its sign: +21.6, -7.5. */
const signedMs = (x: number) => `${x >= 0 ? '+' : ''}${ms(x)}`;

/**
 * The agent's runtime beside raw Docker in the same run:
 * - assignment to running: `DockerRuntime.start` (local image by digest, loop-mounted /output,
 *   labels, limits) against the Engine API's create + start of the same image;
 *   target: at most 50 ms more at the median;
 * - the whole cycle (start, exit, release) against `docker run --rm` of the same image;
 *   target: no slower at the median.
 * The artifact upload is a section of its own ("artifact upload", artifact-upload.ts).
 * Needs dockerd, the local registry and the images of scripts/build-images.sh.
 */
export const agentRuntimeSection: StandaloneSection = {
  name: 'agent runtime',
  run: async (log) => {
    const images = JSON.parse(readFileSync(join(ROOT, '.gpufarm/images.json'), 'utf8')) as { images: { busybox: { repository: string; digest: string; reference: string } } };
    const image = images.images.busybox;
    const docker = new Docker();
    const owner = `bench-${randomBytes(4).toString('hex')}`;
    const stateDir = await mkdtemp(join(tmpdir(), 'gf-bench-'));
    const rawOutputDir = await mkdtemp(join(tmpdir(), 'gf-bench-raw-'));
    const machine = { simulated: true, cpuCores: cpus().length, ramBytes: totalmem() };
    const runtime = new DockerRuntime({ docker, owner, stateDir, machine });
    const missed: string[] = [];
    const spec = (i: number): AssignmentSpec => ({
      assignmentId: `${owner}-${i}`,
      jobId: `job_${owner}_${i}`,
      image: image.repository,
      imageDigest: image.digest,
      command: ['true'],
      env: {},
      gpus: [],
      cpuCores: 1,
      ramBytes: 256 * 1024 * 1024,
      maxRuntimeSeconds: 60,
      networkPolicy: { mode: 'none' },
      inputs: [],
      outputRules: [{ path: '/output', maxBytes: 16 * 1024 * 1024 }],
    });
    try {
      const raw: number[] = [];
      const agent: number[] = [];
      const cycleAgent: number[] = [];
      const cycleCli: number[] = [];
      let rawRuns = 0;
      const rawStart = async () => {
        // Raw Engine API: create + start of the same image with the very settings the agent
        // uses (limits, no network, mounts on a plain folder), so the difference is the agent's own work.
        const config = toContainerConfig(spec(0), machine, { name: `${owner}-raw-${rawRuns++}`, image: `${image.repository}@${image.digest}`, labels: { [LABEL_OWNER]: owner }, inputs: [], outputHostPath: rawOutputDir, imageUser: '' });
        const t0 = performance.now();
        const c = await docker.createContainer(config);
        await c.start();
        const took = performance.now() - t0;
        await c.wait();
        await c.remove({ force: true });
        return took;
      };
      const agentCycle = async (i: number) => {
        // The agent: assignment to running, then the rest of the cycle (exit, release).
        const t0 = performance.now();
        const job = await runtime.start(spec(i), () => undefined);
        const toRunning = performance.now() - t0;
        await job.done;
        await runtime.release(job.assignmentId);
        return [toRunning, performance.now() - t0] as const;
      };
      const cliCycle = async () => {
        const t0 = performance.now();
        await run('docker', ['run', '--rm', '--network', 'none', image.reference, 'true']);
        return performance.now() - t0;
      };
      // One warm-up round, then rounds whose order alternates so neither side always goes first.
      for (let i = -1; i < CONTAINER_RUNS; i++) {
        let rawMs: number, agentMs: number, cycleMs: number, cliMs: number;
        if (i % 2 === 0) {
          rawMs = await rawStart();
          [agentMs, cycleMs] = await agentCycle(i + 1);
          cliMs = await cliCycle();
        } else {
          cliMs = await cliCycle();
          [agentMs, cycleMs] = await agentCycle(i + 1);
          rawMs = await rawStart();
        }
        if (i >= 0) {
          raw.push(rawMs);
          agent.push(agentMs);
          cycleAgent.push(cycleMs);
          cycleCli.push(cliMs);
        }
      }
      const startDelta = median(agent) - median(raw);
      const cycleOk = median(cycleAgent) <= median(cycleCli);
      if (startDelta > 50) missed.push(`agent assignment-to-running ${ms(startDelta)} ms over raw create+start (target <= 50)`);
      if (!cycleOk) missed.push(`agent whole cycle ${ms(median(cycleAgent))} ms vs docker run --rm ${ms(median(cycleCli))} ms`);
      log(`${CONTAINER_RUNS} runs each, busybox \`true\` by digest; the agent's /output is a loop-mounted 16 MiB ext4, the raw baseline's a plain folder`);

      const row = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(58) : c.padStart(12))).join('  ');
      const table = [
        row(['measure', 'median', 'baseline', 'difference', 'target', 'result']),
        row(['assignment to running, ms (baseline: Engine create+start)', ms(median(agent)), ms(median(raw)), signedMs(startDelta), '<= +50 ms', startDelta <= 50 ? 'PASS' : 'FAIL']),
        row(['whole cycle, ms (baseline: docker run --rm)', ms(median(cycleAgent)), ms(median(cycleCli)), signedMs(median(cycleAgent) - median(cycleCli)), '<= 0 ms', cycleOk ? 'PASS' : 'FAIL']),
      ];
      return { table, missed };
    } finally {
      const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER}=${owner}`] } });
      for (const c of left) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
      await rm(stateDir, { recursive: true, force: true });
      await rm(rawOutputDir, { recursive: true, force: true });
    }
  },
};
