import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import type { AssignmentSpec } from '@gpufarm/shared';
import { listEgress } from '@gpufarm/agent/egress';
import { execInContainer, LABEL_OWNER } from '@gpufarm/agent/docker';
import { DockerRuntime } from '@gpufarm/agent/runtime';
import type { StandaloneSection } from './standalone.js';
import { median } from './report.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** Bytes of one download and how many measured runs of each path (after one warm-up of each). */
const BYTES = Number(process.env.BENCH_EGRESS_MIB ?? 256) * 1024 * 1024;
const RUNS = Number(process.env.BENCH_EGRESS_RUNS ?? 5);
/** Target: the proxied path keeps at least this share of the direct path's throughput. */
const TARGET_RATIO = 0.5;



/**
 * Egress through an allowlist job's proxy beside a direct connection, in the same run:
 * a busybox server on Docker's default bridge sends `BENCH_EGRESS_MIB` MiB of zeros per
 * connection; the direct path is `nc` in a container on the same bridge, the proxied path is
 * `CONNECT` through the job's egress proxy from an allowlist job (the agent's runtime, the
 * proxy image of scripts/build-images.sh, the server's name mapped in test mode). Both are
 * timed from `docker exec` start to end, so they carry the same overhead.
 * Target: the proxied median throughput is at least 0.5 of the direct one.
 */
export const egressSection: StandaloneSection = {
  name: 'egress proxy',
  run: async (log) => {
    const images = JSON.parse(readFileSync(join(ROOT, '.gpufarm/images.json'), 'utf8')) as {
      images: { busybox: { repository: string; digest: string; reference: string }; 'egress-proxy'?: { reference: string } };
    };
    const proxyImage = images.images['egress-proxy']?.reference;
    if (!proxyImage) throw new Error('.gpufarm/images.json has no egress-proxy image: run bash scripts/build-images.sh');
    const busybox = images.images.busybox;
    const docker = new Docker();
    const owner = `bench-${randomBytes(4).toString('hex')}`;
    const stateDir = await mkdtemp(join(tmpdir(), 'gf-bench-egress-'));
    const labels = { [LABEL_OWNER]: owner };
    const missed: string[] = [];
    try {
      const server = await docker.createContainer({
        name: `${owner}-server`,
        Image: busybox.reference,
        Cmd: ['nc', '-ll', '-p', '80', '-e', 'head', '-c', String(BYTES), '/dev/zero'],
        Labels: labels,
        HostConfig: { NetworkMode: 'bridge' },
      });
      await server.start();
      const serverIp = (await server.inspect()).NetworkSettings.Networks.bridge?.IPAddress ?? '';
      const client = await docker.createContainer({ name: `${owner}-client`, Image: busybox.reference, Cmd: ['sleep', '3600'], Labels: labels, HostConfig: { NetworkMode: 'bridge' } });
      await client.start();

      const machine = { simulated: true, cpuCores: cpus().length, ramBytes: totalmem(), egress: { image: proxyImage, testHosts: { 'bench.example.com': serverIp } } };
      const runtime = new DockerRuntime({ docker, owner, stateDir, machine, stopGraceSeconds: 1 });
      const spec: AssignmentSpec = {
        assignmentId: `${owner}-job`,
        jobId: `job_${owner}`,
        image: busybox.repository,
        imageDigest: busybox.digest,
        command: ['sleep', '3600'],
        env: {},
        gpus: [],
        cpuCores: 1,
        ramBytes: 256 * 1024 * 1024,
        maxRuntimeSeconds: 3600,
        networkPolicy: { mode: 'allowlist', allow: ['bench.example.com'] },
        inputs: [],
        outputRules: [{ path: '/output', maxBytes: 1024 * 1024 }],
      };
      const job = await runtime.start(spec, () => undefined);

      const timed = async (containerId: string, script: string): Promise<number> => {
        const started = process.hrtime.bigint();
        const out = await execInContainer(docker, containerId, script);
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        const received = Number(out.trim().split(/\s+/).pop());
        if (!(received >= BYTES)) throw new Error(`expected at least ${BYTES} bytes, got ${out.trim().slice(0, 200)}`);
        return BYTES / 1024 / 1024 / seconds;
      };
      const directScript = `nc ${serverIp} 80 </dev/null | wc -c`;
      const proxiedScript = `printf 'CONNECT bench.example.com:80 HTTP/1.1\\r\\n\\r\\n' | nc gf-egress 3128 | wc -c`;
      const direct: number[] = [];
      const proxied: number[] = [];
      for (let i = 0; i <= RUNS; i++) {
        const d = await timed(client.id, directScript);
        const p = await timed(job.containerId, proxiedScript);
        if (i === 0) continue; // warm-up
        direct.push(d);
        proxied.push(p);
      }
      log(`${RUNS} runs of ${BYTES / 1024 / 1024} MiB each way, alternating, after one warm-up; client and job limited to what their containers get (job: 1 core)`);
      await job.cancel();
      await job.done;
      await runtime.release(spec.assignmentId);
      const left = await listEgress(docker, owner);
      if (left.proxies.length + left.networks.length > 0) missed.push('egress proxy or network left after the job');

      const ratio = median(proxied) / median(direct);
      if (ratio < TARGET_RATIO) missed.push(`egress proxied ${ratio.toFixed(2)} of direct throughput (target >= ${TARGET_RATIO})`);
      const row = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(58) : c.padStart(12))).join('  ');
      return {
        table: [
          row(['measure', 'median', 'baseline', 'difference', 'target', 'result']),
          row(['download through the egress proxy, MiB/s (baseline: direct)', median(proxied).toFixed(0), median(direct).toFixed(0), `x${ratio.toFixed(2)}`, `>= x${TARGET_RATIO.toFixed(2)}`, ratio >= TARGET_RATIO ? 'PASS' : 'FAIL']),
        ],
        missed,
      };
    } finally {
      for (const c of await docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER}=${owner}`] } })) {
        await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
      }
      for (const n of await docker.listNetworks({ filters: { label: [`${LABEL_OWNER}=${owner}`] } })) await docker.getNetwork(n.Id).remove().catch(() => undefined);
      await rm(stateDir, { recursive: true, force: true });
    }
  },
};
