import type Docker from 'dockerode';
import { z } from 'zod';
import { demuxDockerOutput } from '../inventory/docker-output.js';

/** Per-GPU figures from the benchmark container. */
export interface GpuFigures {
  index: number;
  uuid: string;
  matmulGflops: number;
  memoryBandwidthMbps: number;
}

/** The GPU-benchmark port. */
export interface GpuBenchmarkRunner {
  run(gpus: Array<{ index: number; uuid: string }>): Promise<GpuFigures[]>;
}

const figureLine = z.strictObject({ uuid: z.string(), matmulGflops: z.number().min(0), memoryBandwidthMbps: z.number().min(0) });

/**
 * The benchmark container through dockerode. Contract of the image (`benchmark_image`, never
 * pulled here): run with the GPUs by UUID and no network, it measures FP16 matmul throughput and
 * device memory bandwidth on each visible GPU and prints one JSON line per GPU,
 * `{"uuid":"GPU-…","matmulGflops":…,"memoryBandwidthMbps":…}`, then exits 0.
 */
export function dockerGpuBenchmark(docker: Docker, options: { image: string; timeoutMs?: number }): GpuBenchmarkRunner {
  const timeoutMs = options.timeoutMs ?? 300_000;
  return {
    async run(gpus) {
      await docker.getImage(options.image).inspect().catch(() => {
        throw new Error(`the benchmark image ${options.image} is not on this machine`);
      });
      const container = await docker.createContainer({
        Image: options.image,
        Labels: { 'gpufarm.probe': 'benchmark' },
        HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], DeviceRequests: [{ Driver: 'nvidia', DeviceIDs: gpus.map((g) => g.uuid), Capabilities: [['gpu', 'compute', 'utility']] }] },
      });
      try {
        const waited = container.wait({ condition: 'next-exit' }) as Promise<{ StatusCode: number }>;
        await container.start();
        let timer: NodeJS.Timeout | undefined;
        const outcome = await Promise.race([waited, new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), timeoutMs); })]);
        clearTimeout(timer);
        if (outcome === 'timeout') throw new Error(`the benchmark container ran longer than ${timeoutMs} ms`);
        const out = demuxDockerOutput(await container.logs({ stdout: true, stderr: false })).stdout;
        if (outcome.StatusCode !== 0) throw new Error(`the benchmark container exited with ${outcome.StatusCode}`);
        const figures = out.split('\n').filter((l) => l.startsWith('{')).map((l) => figureLine.parse(JSON.parse(l)));
        return gpus.map((g) => {
          const f = figures.find((x) => x.uuid === g.uuid);
          if (!f) throw new Error(`the benchmark container printed no figures for ${g.uuid}`);
          return { index: g.index, uuid: g.uuid, matmulGflops: f.matmulGflops, memoryBandwidthMbps: f.memoryBandwidthMbps };
        });
      } finally {
        await container.remove({ force: true }).catch(() => undefined);
      }
    },
  };
}
