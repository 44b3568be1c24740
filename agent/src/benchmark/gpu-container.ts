import type Docker from 'dockerode';
import { z } from 'zod';
import { demuxDockerOutput } from '../inventory/docker-output.js';
import { ensureGpuBenchImage, findGpuBenchDir, namesTaggedImage, readGpuBenchProgram } from './gpu-bench-image.js';

/** Per-GPU figures from the benchmark container. */
export interface GpuFigures {
  index: number;
  uuid: string;
  /** Dense FP16 tensor-core matmul (fp32 accumulation), GFLOPS: what tiers compare. */
  matmulGflops: number;
  /** Device memory bandwidth (a copy: bytes read plus written), MB/s: what tiers compare. */
  memoryBandwidthMbps: number;
  fp16MatmulGflops: number;
  /** Null below compute capability 8.0 (no bf16 tensor cores). */
  bf16MatmulGflops: number | null;
  fp32Gflops: number;
  hostToDeviceMbps: number;
  deviceToHostMbps: number;
}

/** The GPU-benchmark port. */
export interface GpuBenchmarkRunner {
  run(gpus: Array<{ index: number; uuid: string }>): Promise<GpuFigures[]>;
}

const figure = z.number().finite().min(0);

/**
 * One line of gpu-bench's stdout (agent/gpu-bench, docs/gpu-benchmark.md), exactly: a GPU is
 * printed only after its matmuls were checked against a reference.
 */
export const gpuBenchLineSchema = z.strictObject({
  uuid: z.string().regex(/^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/),
  index: z.number().int().min(0),
  name: z.string().min(1).max(256),
  computeCapability: z.string().regex(/^\d{1,2}\.\d$/),
  pciBusId: z.string().max(64).nullable(),
  memoryBytes: z.number().int().min(0),
  multiprocessors: z.number().int().min(1),
  /** The CUDA version the driver supports, `13.0`. */
  driverCudaVersion: z.string().regex(/^\d+\.\d+$/),
  program: z.string().regex(/^gpu-bench \d+\.\d+\.\d+$/),
  /**
   * The GPU code that ran: `fatbin` (the toolkit's SASS, or its PTX beyond), or, on a driver
   * older than the toolkit's family, `compat-ptx-compute_75`/`compat-ptx-compute_80` compiled
   * by the driver's JIT. Absent from programs before it was added.
   */
  gpuCode: z.enum(['fatbin', 'compat-ptx-compute_75', 'compat-ptx-compute_80']).optional(),
  matmulSize: z.number().int().min(1),
  matmulGflops: figure,
  fp16MatmulGflops: figure,
  bf16MatmulGflops: figure.nullable(),
  fp32Gflops: figure,
  memoryBandwidthMbps: figure,
  hostToDeviceMbps: figure,
  deviceToHostMbps: figure,
});
export type GpuBenchLine = z.infer<typeof gpuBenchLineSchema>;

/** gpu-bench's own account of a failure: its last `gpu-bench: …` line on stderr. */
function programError(stderr: string): string | null {
  const lines = stderr.split('\n').filter((l) => l.startsWith('gpu-bench: '));
  return lines.length > 0 ? lines[lines.length - 1]!.slice('gpu-bench: '.length) : null;
}

/** The GPUs by UUID as the NVIDIA Container Toolkit takes them, with the driver's CUDA (compute) and NVML (utility) libraries. */
export function gpuBenchDeviceRequests(uuids: readonly string[]): Array<{ Driver: string; DeviceIDs: string[]; Capabilities: string[][] }> {
  return [{ Driver: 'nvidia', DeviceIDs: [...uuids], Capabilities: [['gpu', 'compute', 'utility']] }];
}

/**
 * The gpu-bench image to run for the `benchmark_image` setting `image`: a repository without a
 * tag is the image this agent makes from its own program (`programDir`, default where the
 * package carries it), made on first use; a tagged reference is the operator's, used as it is.
 * @throws Error when the program is missing, Docker refuses the image, or a tagged image is not here
 */
export async function gpuBenchImage(docker: Docker, options: { image: string; programDir?: string }): Promise<string> {
  const image = namesTaggedImage(options.image)
    ? options.image
    : (await ensureGpuBenchImage(docker, { repository: options.image, program: readGpuBenchProgram(options.programDir ?? findGpuBenchDir()) })).image;
  await docker.getImage(image).inspect().catch(() => {
    throw new Error(`the benchmark image ${image} is not on this machine`);
  });
  return image;
}

/**
 * The benchmark container through dockerode. `image` is the `benchmark_image` setting: a
 * repository without a tag (default `gpufarm/gpu-bench`) means the image this agent makes from
 * the gpu-bench program it carries (`gpu-bench-image.ts`) on first use; a reference with a tag
 * or digest is an image of the operator's, used as it is (never pulled). Run with the GPUs by
 * UUID and no network, the program measures each GPU it sees and prints one JSON line per GPU
 * (`gpuBenchLineSchema`), then exits 0.
 */
export function dockerGpuBenchmark(docker: Docker, options: { image: string; programDir?: string; timeoutMs?: number }): GpuBenchmarkRunner {
  const timeoutMs = options.timeoutMs ?? 300_000;
  return {
    async run(gpus) {
      const image = await gpuBenchImage(docker, options);
      const container = await docker.createContainer({
        Image: image,
        Labels: { 'gpufarm.probe': 'benchmark' },
        HostConfig: { NetworkMode: 'none', CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], DeviceRequests: gpuBenchDeviceRequests(gpus.map((g) => g.uuid)) },
      });
      try {
        await container.start();
        // Asked after the start: 'not-running' answers at once, with the exit code, for a container that
        // already exited. A 'next-exit' wait sent beside the start could reach dockerd after a fast exit
        // (no driver: exit 3 at once) and wait for a next exit that never comes.
        const waited = container.wait({ condition: 'not-running' }) as Promise<{ StatusCode: number }>;
        let timer: NodeJS.Timeout | undefined;
        const outcome = await Promise.race([waited, new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), timeoutMs); })]);
        clearTimeout(timer);
        if (outcome === 'timeout') throw new Error(`the benchmark container ran longer than ${timeoutMs} ms`);
        const { stdout, stderr } = demuxDockerOutput(await container.logs({ stdout: true, stderr: true }));
        if (outcome.StatusCode !== 0) {
          const said = programError(stderr);
          throw new Error(`the benchmark container exited with ${outcome.StatusCode}${said ? `: ${said}` : ''}`);
        }
        const figures = stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => gpuBenchLineSchema.parse(JSON.parse(l)));
        return gpus.map((g) => {
          const f = figures.find((x) => x.uuid === g.uuid);
          if (!f) throw new Error(`the benchmark container printed no figures for ${g.uuid}`);
          return {
            index: g.index,
            uuid: g.uuid,
            matmulGflops: f.matmulGflops,
            memoryBandwidthMbps: f.memoryBandwidthMbps,
            fp16MatmulGflops: f.fp16MatmulGflops,
            bf16MatmulGflops: f.bf16MatmulGflops,
            fp32Gflops: f.fp32Gflops,
            hostToDeviceMbps: f.hostToDeviceMbps,
            deviceToHostMbps: f.deviceToHostMbps,
          };
        });
      } finally {
        await container.remove({ force: true }).catch(() => undefined);
      }
    },
  };
}
