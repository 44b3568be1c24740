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
}

const GiB = 1024 ** 3;

export const GPU_CLASSES: readonly GpuClass[] = [
  { classId: 'h100-80gb-sxm', label: 'H100 80GB SXM', model: 'NVIDIA H100 80GB HBM3', vendor: 'nvidia', family: 'datacenter', vramBytes: 80 * GiB, expectedMatmulGflops: 750_000, expectedMemoryBandwidthMbps: 3_000_000, namePatterns: ['h100 80gb hbm3', 'h100-sxm'] },
  { classId: 'h100-80gb-pcie', label: 'H100 80GB PCIe', model: 'NVIDIA H100 PCIe', vendor: 'nvidia', family: 'datacenter', vramBytes: 80 * GiB, expectedMatmulGflops: 600_000, expectedMemoryBandwidthMbps: 1_900_000, namePatterns: ['h100 pcie'] },
  { classId: 'a100-80gb', label: 'A100 80GB', model: 'NVIDIA A100-SXM4-80GB', vendor: 'nvidia', family: 'datacenter', vramBytes: 80 * GiB, expectedMatmulGflops: 280_000, expectedMemoryBandwidthMbps: 1_800_000, namePatterns: ['a100-sxm4-80gb', 'a100 80gb', 'a100-pcie-80gb'] },
  { classId: 'a100-40gb', label: 'A100 40GB', model: 'NVIDIA A100-SXM4-40GB', vendor: 'nvidia', family: 'datacenter', vramBytes: 40 * GiB, expectedMatmulGflops: 280_000, expectedMemoryBandwidthMbps: 1_400_000, namePatterns: ['a100-sxm4-40gb', 'a100-pcie-40gb', 'a100 40gb'] },
  { classId: 'l40s-48gb', label: 'L40S 48GB', model: 'NVIDIA L40S', vendor: 'nvidia', family: 'datacenter', vramBytes: 48 * GiB, expectedMatmulGflops: 330_000, expectedMemoryBandwidthMbps: 800_000, namePatterns: ['l40s', 'nvidia l40s'] },
  { classId: 'l4-24gb', label: 'L4 24GB', model: 'NVIDIA L4', vendor: 'nvidia', family: 'datacenter', vramBytes: 24 * GiB, expectedMatmulGflops: 110_000, expectedMemoryBandwidthMbps: 270_000, namePatterns: ['nvidia l4'] },
  { classId: 'a10-24gb', label: 'A10 24GB', model: 'NVIDIA A10', vendor: 'nvidia', family: 'datacenter', vramBytes: 24 * GiB, expectedMatmulGflops: 110_000, expectedMemoryBandwidthMbps: 550_000, namePatterns: ['nvidia a10'] },
  { classId: 'rtx-6000-ada-48gb', label: 'RTX 6000 Ada 48GB', model: 'NVIDIA RTX 6000 Ada Generation', vendor: 'nvidia', family: 'workstation', vramBytes: 48 * GiB, expectedMatmulGflops: 330_000, expectedMemoryBandwidthMbps: 850_000, namePatterns: ['rtx 6000 ada'] },
  { classId: 'rtx-a6000-48gb', label: 'RTX A6000 48GB', model: 'NVIDIA RTX A6000', vendor: 'nvidia', family: 'workstation', vramBytes: 48 * GiB, expectedMatmulGflops: 150_000, expectedMemoryBandwidthMbps: 700_000, namePatterns: ['rtx a6000'] },
  { classId: 'rtx-4090-24gb', label: 'RTX 4090 24GB', model: 'NVIDIA GeForce RTX 4090', vendor: 'nvidia', family: 'consumer', vramBytes: 24 * GiB, expectedMatmulGflops: 160_000, expectedMemoryBandwidthMbps: 900_000, namePatterns: ['rtx 4090'] },
  { classId: 'rtx-3090-24gb', label: 'RTX 3090 24GB', model: 'NVIDIA GeForce RTX 3090', vendor: 'nvidia', family: 'consumer', vramBytes: 24 * GiB, expectedMatmulGflops: 70_000, expectedMemoryBandwidthMbps: 850_000, namePatterns: ['rtx 3090'] },
  { classId: 'rtx-4080-16gb', label: 'RTX 4080 16GB', model: 'NVIDIA GeForce RTX 4080', vendor: 'nvidia', family: 'consumer', vramBytes: 16 * GiB, expectedMatmulGflops: 95_000, expectedMemoryBandwidthMbps: 650_000, namePatterns: ['rtx 4080'] },
  { classId: 'rtx-3080-10gb', label: 'RTX 3080 10GB', model: 'NVIDIA GeForce RTX 3080', vendor: 'nvidia', family: 'consumer', vramBytes: 10 * GiB, expectedMatmulGflops: 55_000, expectedMemoryBandwidthMbps: 700_000, namePatterns: ['rtx 3080'] },
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
