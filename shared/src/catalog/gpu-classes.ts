/**
 * The GPU class catalog: every GPU model the marketplace lists, with the figures its benchmark
 * is compared against. The control plane syncs this into `gpu_classes` at start; the agent maps
 * `nvidia-smi` product names to a class with `namePatterns`.
 */
export interface GpuClass {
  classId: string;
  label: string;
  model: string;
  vendor: 'nvidia';
  family: 'consumer' | 'datacenter' | 'workstation';
  /** Nominal memory per GPU in bytes (GiB-based, as the vendor's "GB" means). */
  vramBytes: number;
  /** Dense FP16 tensor throughput the benchmark expects at tier A, GFLOPS. */
  expectedMatmulGflops: number;
  /** Device memory bandwidth the benchmark expects at tier A, MB/s. */
  expectedMemoryBandwidthMbps: number;
  /** Lower-case substrings of `nvidia-smi` product names that identify the class. */
  namePatterns: string[];
  /** The GPU generation; it sets the oldest driver the class is offered with (`MIN_DRIVER_BY_ARCHITECTURE`). */
  architecture: GpuArchitecture;
}

export type GpuArchitecture = 'ampere' | 'ada' | 'hopper';

/**
 * The oldest NVIDIA Linux driver a machine of each generation is offered with. Job images are
 * CUDA 12 images, which need 525.60.13 at least; Hopper needs the R535 branch, the first
 * production branch with its full CUDA 12.2 support (FP8 matmuls, confidential computing off).
 */
export const MIN_DRIVER_BY_ARCHITECTURE: Readonly<Record<GpuArchitecture, string>> = {
  ampere: '525.60.13',
  ada: '525.60.13',
  hopper: '535.54.03',
};

/** The oldest driver a class is offered with (see `MIN_DRIVER_BY_ARCHITECTURE`). */
export function minDriverFor(gpuClass: Pick<GpuClass, 'architecture'>): string {
  return MIN_DRIVER_BY_ARCHITECTURE[gpuClass.architecture];
}

/**
 * Compares NVIDIA driver versions (`550.54.15`) part by part as numbers: negative when `a` is
 * older, 0 when equal, positive when newer; a missing part counts as 0. A part that is no number
 * counts as 0 too, so a malformed version compares as old.
 */
export function compareDriverVersions(a: string, b: string): number {
  const left = a.split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : 0));
  const right = b.split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : 0));
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const diff = (left[i] ?? 0) - (right[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return 0;
}

const GiB = 1024 ** 3;

export const GPU_CLASSES: readonly GpuClass[] = [
  { classId: 'h100-80gb-sxm', label: 'H100 80GB SXM', model: 'NVIDIA H100 80GB HBM3', vendor: 'nvidia', family: 'datacenter', vramBytes: 80 * GiB, expectedMatmulGflops: 750_000, expectedMemoryBandwidthMbps: 3_000_000, namePatterns: ['h100 80gb hbm3', 'h100-sxm'], architecture: 'hopper' },
  { classId: 'h100-80gb-pcie', label: 'H100 80GB PCIe', model: 'NVIDIA H100 PCIe', vendor: 'nvidia', family: 'datacenter', vramBytes: 80 * GiB, expectedMatmulGflops: 600_000, expectedMemoryBandwidthMbps: 1_900_000, namePatterns: ['h100 pcie'], architecture: 'hopper' },
  { classId: 'a100-80gb', label: 'A100 80GB', model: 'NVIDIA A100-SXM4-80GB', vendor: 'nvidia', family: 'datacenter', vramBytes: 80 * GiB, expectedMatmulGflops: 280_000, expectedMemoryBandwidthMbps: 1_800_000, namePatterns: ['a100-sxm4-80gb', 'a100 80gb', 'a100-pcie-80gb'], architecture: 'ampere' },
  { classId: 'a100-40gb', label: 'A100 40GB', model: 'NVIDIA A100-SXM4-40GB', vendor: 'nvidia', family: 'datacenter', vramBytes: 40 * GiB, expectedMatmulGflops: 280_000, expectedMemoryBandwidthMbps: 1_400_000, namePatterns: ['a100-sxm4-40gb', 'a100-pcie-40gb', 'a100 40gb'], architecture: 'ampere' },
  { classId: 'l40s-48gb', label: 'L40S 48GB', model: 'NVIDIA L40S', vendor: 'nvidia', family: 'datacenter', vramBytes: 48 * GiB, expectedMatmulGflops: 330_000, expectedMemoryBandwidthMbps: 800_000, namePatterns: ['l40s', 'nvidia l40s'], architecture: 'ada' },
  { classId: 'l4-24gb', label: 'L4 24GB', model: 'NVIDIA L4', vendor: 'nvidia', family: 'datacenter', vramBytes: 24 * GiB, expectedMatmulGflops: 110_000, expectedMemoryBandwidthMbps: 270_000, namePatterns: ['nvidia l4'], architecture: 'ada' },
  { classId: 'a10-24gb', label: 'A10 24GB', model: 'NVIDIA A10', vendor: 'nvidia', family: 'datacenter', vramBytes: 24 * GiB, expectedMatmulGflops: 110_000, expectedMemoryBandwidthMbps: 550_000, namePatterns: ['nvidia a10'], architecture: 'ampere' },
  { classId: 'rtx-6000-ada-48gb', label: 'RTX 6000 Ada 48GB', model: 'NVIDIA RTX 6000 Ada Generation', vendor: 'nvidia', family: 'workstation', vramBytes: 48 * GiB, expectedMatmulGflops: 330_000, expectedMemoryBandwidthMbps: 850_000, namePatterns: ['rtx 6000 ada'], architecture: 'ada' },
  { classId: 'rtx-a6000-48gb', label: 'RTX A6000 48GB', model: 'NVIDIA RTX A6000', vendor: 'nvidia', family: 'workstation', vramBytes: 48 * GiB, expectedMatmulGflops: 150_000, expectedMemoryBandwidthMbps: 700_000, namePatterns: ['rtx a6000'], architecture: 'ampere' },
  { classId: 'rtx-4090-24gb', label: 'RTX 4090 24GB', model: 'NVIDIA GeForce RTX 4090', vendor: 'nvidia', family: 'consumer', vramBytes: 24 * GiB, expectedMatmulGflops: 160_000, expectedMemoryBandwidthMbps: 900_000, namePatterns: ['rtx 4090'], architecture: 'ada' },
  { classId: 'rtx-3090-24gb', label: 'RTX 3090 24GB', model: 'NVIDIA GeForce RTX 3090', vendor: 'nvidia', family: 'consumer', vramBytes: 24 * GiB, expectedMatmulGflops: 70_000, expectedMemoryBandwidthMbps: 850_000, namePatterns: ['rtx 3090'], architecture: 'ampere' },
  { classId: 'rtx-4080-16gb', label: 'RTX 4080 16GB', model: 'NVIDIA GeForce RTX 4080', vendor: 'nvidia', family: 'consumer', vramBytes: 16 * GiB, expectedMatmulGflops: 95_000, expectedMemoryBandwidthMbps: 650_000, namePatterns: ['rtx 4080'], architecture: 'ada' },
  { classId: 'rtx-3080-10gb', label: 'RTX 3080 10GB', model: 'NVIDIA GeForce RTX 3080', vendor: 'nvidia', family: 'consumer', vramBytes: 10 * GiB, expectedMatmulGflops: 55_000, expectedMemoryBandwidthMbps: 700_000, namePatterns: ['rtx 3080'], architecture: 'ampere' },
];

/**
 * What the benchmark's host checks expect of a machine at tier A, whatever its GPUs: sequential
 * disk write of the work directory (fsynced) and single-core SHA-256, both in MB/s (10^6 bytes).
 * Host figures can lower a machine's tier to B at most.
 */
export const HOST_BENCHMARK_EXPECTATIONS = {
  diskWriteMBps: 1_000,
  sha256MBps: 400,
} as const;

const byId = new Map(GPU_CLASSES.map((c) => [c.classId, c]));

export const gpuClassIds = GPU_CLASSES.map((c) => c.classId);

export function findGpuClass(classId: string): GpuClass | undefined {
  return byId.get(classId);
}

/** Maps an `nvidia-smi` product name to a class; the longest matching pattern wins. */
export function gpuClassForProductName(productName: string): GpuClass | undefined {
  const name = productName.toLowerCase();
  let best: { cls: GpuClass; length: number } | undefined;
  for (const cls of GPU_CLASSES) {
    for (const pattern of cls.namePatterns) {
      if (name.includes(pattern) && (!best || pattern.length > best.length)) best = { cls, length: pattern.length };
    }
  }
  return best?.cls;
}
