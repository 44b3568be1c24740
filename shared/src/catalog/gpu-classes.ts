import { ARCHITECTURE_LABELS, GPU_ARCHITECTURES, MIN_DRIVER_BY_ARCHITECTURE, type GpuArchitecture } from './gpu-architectures.js';

export * from './gpu-architectures.js';

/**
 * The GPU class catalog. Curated classes are the models this file lists, each with the figures
 * its benchmark is compared against and how those figures were obtained; any other NVIDIA GPU
 * of compute capability 7.5 or newer gets a derived class (`derivedGpuClass`), named from its
 * product name and memory size and judged against its generation's figures. The control plane
 * syncs the curated classes into `gpu_classes` at start and adds a derived class when a machine
 * first reports one; the agent classifies each GPU with `classifyGpu` (`gpu-classify.ts`).
 */
export interface GpuClass {
  classId: string;
  label: string;
  /** The product name `nvidia-smi` prints for the model (a derived class: the name it printed). */
  model: string;
  vendor: 'nvidia';
  family: GpuFamily;
  /** Nominal memory per GPU in bytes (GiB-based, as the vendor's "GB" means). */
  vramBytes: number;
  /** Dense FP16/BF16 tensor matmul throughput (FP32 accumulate) the benchmark expects at tier A, GFLOPS. */
  expectedMatmulGflops: number;
  /** Device memory bandwidth the benchmark expects at tier A, MB/s. */
  expectedMemoryBandwidthMbps: number;
  /** How the two expected figures were obtained, in words: vendor peak, efficiency, sources. */
  figureSource: string;
  /** `nvidia-smi` product names of the model, normalized (`normalizeGpuName`); matched whole. */
  names: string[];
  /**
   * PCI device ids of the model (`pci_device_id` 0x2330_10DE → 0x2330): they name the model
   * when a driver older than the card prints "Graphics Device".
   */
  pciDeviceIds: number[];
  /** The GPU generation; it sets the oldest driver the class is offered with (`minDriverFor`). */
  architecture: GpuArchitecture;
  /** A newer oldest driver than the generation's, when the model needs one. */
  minDriver?: string;
  /** `curated`: listed here; `derived`: made for a GPU no curated class matches. */
  origin: 'curated' | 'derived';
}

/** `consumer`, `workstation` or `datacenter` (`GPU_FAMILIES` of the capacity schema). */
export type GpuFamily = 'consumer' | 'workstation' | 'datacenter';

/** The oldest driver a class is offered with: its own minimum, else its generation's. */
export function minDriverFor(gpuClass: Pick<GpuClass, 'architecture'> & { minDriver?: string | undefined }): string {
  return gpuClass.minDriver ?? MIN_DRIVER_BY_ARCHITECTURE[gpuClass.architecture];
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

/**
 * The share of the vendor's peak that the expected (tier A) figures assume, per generation,
 * until the benchmark program has run on a real GPU of that generation (its measured
 * efficiencies go in `docs/gpu-benchmark.md`, then here). Assumed: a well-tuned FP16/BF16 GEMM
 * at 8192³ reaches about 0.8 of the dense tensor peak (public PyTorch figures: A100 0.79-0.85,
 * H100 SXM 0.80, B200 0.75; GeForce cards boost past the clock their peak is quoted at and
 * exceed 1.0), and a device-to-device copy about 0.85 of the memory bus peak.
 */
export const REFERENCE_EFFICIENCY: Readonly<Record<GpuArchitecture, { matmul: number; memory: number }>> = {
  turing: { matmul: 0.8, memory: 0.85 },
  ampere: { matmul: 0.8, memory: 0.85 },
  ada: { matmul: 0.8, memory: 0.85 },
  hopper: { matmul: 0.8, memory: 0.85 },
  blackwell: { matmul: 0.8, memory: 0.85 },
};

interface CuratedSpec {
  classId: string;
  label: string;
  model: string;
  family: GpuFamily;
  vramGiB: number;
  architecture: GpuArchitecture;
  /** Vendor peak: dense FP16/BF16 tensor TFLOPS with FP32 accumulate, memory GB/s. */
  peak: { matmulTflops: number; memoryGBps: number; source: string };
  /** A model-specific matmul efficiency in place of the generation's, with why. */
  matmulEfficiency?: { value: number; why: string };
  names: string[];
  pciDeviceIds: number[];
  minDriver?: string;
}

function curated(spec: CuratedSpec): GpuClass {
  const eff = REFERENCE_EFFICIENCY[spec.architecture];
  const matmulEff = spec.matmulEfficiency?.value ?? eff.matmul;
  const generation = ARCHITECTURE_LABELS[spec.architecture];
  const matmulWhy = spec.matmulEfficiency ? `${matmulEff} (${spec.matmulEfficiency.why})` : `${matmulEff}, the assumed ${generation} matmul efficiency`;
  return {
    classId: spec.classId,
    label: spec.label,
    model: spec.model,
    vendor: 'nvidia',
    family: spec.family,
    vramBytes: spec.vramGiB * GiB,
    expectedMatmulGflops: Math.round(spec.peak.matmulTflops * 1000 * matmulEff),
    expectedMemoryBandwidthMbps: Math.round(spec.peak.memoryGBps * 1000 * eff.memory),
    figureSource:
      `vendor peak × efficiency, not yet measured on this model: matmul ${spec.peak.matmulTflops} TFLOPS dense FP16/BF16 (FP32 accumulate) × ${matmulWhy}; ` +
      `memory ${spec.peak.memoryGBps} GB/s × ${eff.memory}, the assumed ${generation} copy efficiency; peak figures: ${spec.peak.source}`,
    names: spec.names,
    pciDeviceIds: spec.pciDeviceIds,
    architecture: spec.architecture,
    ...(spec.minDriver ? { minDriver: spec.minDriver } : {}),
    origin: 'curated',
  };
}

/** GeForce cards run FP16 tensor math with FP32 accumulate at half their FP16-accumulate rate; the peak below is that half. */
const GEFORCE_HALF = 'half the FP16-accumulate tensor rate, as on every GeForce card';

/**
 * The curated classes, oldest generation first, then roughly by size. Peaks are the vendor's
 * published figures: the dense (not 2:4 sparse) FP16/BF16 tensor rate with FP32 accumulate at
 * the published boost clock, and the memory bus bandwidth.
 */
export const GPU_CLASSES: readonly GpuClass[] = [
  // Turing (compute capability 7.5)
  curated({ classId: 't4-16gb', label: 'Tesla T4 16GB', model: 'Tesla T4', family: 'datacenter', vramGiB: 16, architecture: 'turing', peak: { matmulTflops: 65, memoryGBps: 320, source: 'Tesla T4 datasheet (65 FP16 TFLOPS mixed precision, 320 GB/s)' }, matmulEfficiency: { value: 0.37, why: 'its 70 W power cap holds tensor clocks far below boost: a sustained cuBLAS FP16 GEMM reached about 24 of 65 TFLOPS, which NVIDIA\'s developer forum (thread 264462) puts down to power capping' }, names: ['tesla t4'], pciDeviceIds: [0x1eb8] }),
  curated({ classId: 'gtx-1660-ti-6gb', label: 'GTX 1660 Ti 6GB', model: 'NVIDIA GeForce GTX 1660 Ti', family: 'consumer', vramGiB: 6, architecture: 'turing', peak: { matmulTflops: 5.4, memoryGBps: 288, source: 'TU116 has no tensor cores: the matmul peak is its FP32 CUDA-core rate (1536 cores × 2 × 1770 MHz), the rate an FP16 product with FP32 accumulate is judged against on it; 288 GB/s from the GTX 1660 Ti specifications' }, names: ['geforce gtx 1660 ti'], pciDeviceIds: [0x2182] }),
  curated({ classId: 'rtx-2080-ti-11gb', label: 'RTX 2080 Ti 11GB', model: 'NVIDIA GeForce RTX 2080 Ti', family: 'consumer', vramGiB: 11, architecture: 'turing', peak: { matmulTflops: 53.8, memoryGBps: 616, source: `Turing architecture whitepaper (107.6 FP16 tensor TFLOPS at the 1545 MHz reference boost; ${GEFORCE_HALF}), 616 GB/s` }, names: ['geforce rtx 2080 ti'], pciDeviceIds: [0x1e04, 0x1e07] }),
  curated({ classId: 'titan-rtx-24gb', label: 'TITAN RTX 24GB', model: 'NVIDIA TITAN RTX', family: 'consumer', vramGiB: 24, architecture: 'turing', peak: { matmulTflops: 130.5, memoryGBps: 672, source: 'TITAN RTX specifications (130 tensor TFLOPS, full rate with FP32 accumulate), 672 GB/s' }, names: ['titan rtx'], pciDeviceIds: [0x1e02] }),
  curated({ classId: 'quadro-rtx-6000-24gb', label: 'Quadro RTX 6000 24GB', model: 'Quadro RTX 6000', family: 'workstation', vramGiB: 24, architecture: 'turing', peak: { matmulTflops: 130.5, memoryGBps: 672, source: 'Quadro RTX 6000 datasheet (130.5 tensor TFLOPS, 672 GB/s)' }, names: ['quadro rtx 6000'], pciDeviceIds: [0x1e30, 0x1e78] }),
  curated({ classId: 'quadro-rtx-8000-48gb', label: 'Quadro RTX 8000 48GB', model: 'Quadro RTX 8000', family: 'workstation', vramGiB: 48, architecture: 'turing', peak: { matmulTflops: 130.5, memoryGBps: 672, source: 'Quadro RTX 8000 datasheet (130.5 tensor TFLOPS, 672 GB/s)' }, names: ['quadro rtx 8000'], pciDeviceIds: [0x1e30, 0x1e78] }),

  // Ampere (8.0 GA100, 8.6 GA10x)
  curated({ classId: 'a100-80gb', label: 'A100 80GB', model: 'NVIDIA A100-SXM4-80GB', family: 'datacenter', vramGiB: 80, architecture: 'ampere', peak: { matmulTflops: 312, memoryGBps: 2039, source: 'A100 datasheet (312 TFLOPS, 2039 GB/s SXM; the PCIe card has 1935 GB/s)' }, names: ['a100 sxm4 80gb', 'a100 80gb pcie', 'a100 pcie 80gb'], pciDeviceIds: [0x20b2, 0x20b5] }),
  curated({ classId: 'a100-40gb', label: 'A100 40GB', model: 'NVIDIA A100-SXM4-40GB', family: 'datacenter', vramGiB: 40, architecture: 'ampere', peak: { matmulTflops: 312, memoryGBps: 1555, source: 'A100 datasheet (312 TFLOPS, 1555 GB/s)' }, names: ['a100 sxm4 40gb', 'a100 pcie 40gb'], pciDeviceIds: [0x20b0, 0x20f1] }),
  curated({ classId: 'a30-24gb', label: 'A30 24GB', model: 'NVIDIA A30', family: 'datacenter', vramGiB: 24, architecture: 'ampere', peak: { matmulTflops: 165, memoryGBps: 933, source: 'A30 datasheet (165 TFLOPS, 933 GB/s)' }, names: ['a30'], pciDeviceIds: [0x20b7] }),
  curated({ classId: 'a40-48gb', label: 'A40 48GB', model: 'NVIDIA A40', family: 'datacenter', vramGiB: 48, architecture: 'ampere', peak: { matmulTflops: 149.7, memoryGBps: 696, source: 'A40 datasheet (149.7 TFLOPS, 696 GB/s)' }, names: ['a40'], pciDeviceIds: [0x2235] }),
  curated({ classId: 'a10-24gb', label: 'A10 24GB', model: 'NVIDIA A10', family: 'datacenter', vramGiB: 24, architecture: 'ampere', peak: { matmulTflops: 125, memoryGBps: 600, source: 'A10 datasheet (125 TFLOPS, 600 GB/s)' }, names: ['a10'], pciDeviceIds: [0x2236] }),
  curated({ classId: 'rtx-a6000-48gb', label: 'RTX A6000 48GB', model: 'NVIDIA RTX A6000', family: 'workstation', vramGiB: 48, architecture: 'ampere', peak: { matmulTflops: 154.8, memoryGBps: 768, source: 'RTX A6000 datasheet (309.7 sparse tensor TFLOPS, halved; 768 GB/s)' }, names: ['rtx a6000'], pciDeviceIds: [0x2230] }),
  curated({ classId: 'rtx-a5000-24gb', label: 'RTX A5000 24GB', model: 'NVIDIA RTX A5000', family: 'workstation', vramGiB: 24, architecture: 'ampere', peak: { matmulTflops: 111.1, memoryGBps: 768, source: 'RTX A5000 datasheet (222.2 sparse tensor TFLOPS, halved; 768 GB/s)' }, names: ['rtx a5000'], pciDeviceIds: [0x2231] }),
  curated({ classId: 'rtx-a4000-16gb', label: 'RTX A4000 16GB', model: 'NVIDIA RTX A4000', family: 'workstation', vramGiB: 16, architecture: 'ampere', peak: { matmulTflops: 76.7, memoryGBps: 448, source: 'RTX A4000 datasheet (153.4 sparse tensor TFLOPS, halved; 448 GB/s)' }, names: ['rtx a4000'], pciDeviceIds: [0x24b0] }),
  curated({ classId: 'rtx-3090-ti-24gb', label: 'RTX 3090 Ti 24GB', model: 'NVIDIA GeForce RTX 3090 Ti', family: 'consumer', vramGiB: 24, architecture: 'ampere', peak: { matmulTflops: 80, memoryGBps: 1008, source: `GA102 per-SM tensor rate × 84 SMs × 1860 MHz boost (${GEFORCE_HALF}), 1008 GB/s` }, names: ['geforce rtx 3090 ti'], pciDeviceIds: [0x2203] }),
  curated({ classId: 'rtx-3090-24gb', label: 'RTX 3090 24GB', model: 'NVIDIA GeForce RTX 3090', family: 'consumer', vramGiB: 24, architecture: 'ampere', peak: { matmulTflops: 71, memoryGBps: 936, source: `Ampere GA102 whitepaper (142 FP16 tensor TFLOPS; ${GEFORCE_HALF}), 936 GB/s` }, names: ['geforce rtx 3090'], pciDeviceIds: [0x2204] }),
  curated({ classId: 'rtx-3080-ti-12gb', label: 'RTX 3080 Ti 12GB', model: 'NVIDIA GeForce RTX 3080 Ti', family: 'consumer', vramGiB: 12, architecture: 'ampere', peak: { matmulTflops: 68.2, memoryGBps: 912, source: `GA102 per-SM tensor rate × 80 SMs × 1665 MHz boost (${GEFORCE_HALF}), 912 GB/s` }, names: ['geforce rtx 3080 ti'], pciDeviceIds: [0x2208] }),
  curated({ classId: 'rtx-3080-10gb', label: 'RTX 3080 10GB', model: 'NVIDIA GeForce RTX 3080', family: 'consumer', vramGiB: 10, architecture: 'ampere', peak: { matmulTflops: 59.5, memoryGBps: 760, source: `Ampere GA102 whitepaper (119 FP16 tensor TFLOPS; ${GEFORCE_HALF}), 760 GB/s` }, names: ['geforce rtx 3080'], pciDeviceIds: [0x2206, 0x2216] }),
  curated({ classId: 'rtx-3070-8gb', label: 'RTX 3070 8GB', model: 'NVIDIA GeForce RTX 3070', family: 'consumer', vramGiB: 8, architecture: 'ampere', peak: { matmulTflops: 40.6, memoryGBps: 448, source: `Ampere GA102 whitepaper's GA104 table (81.3 FP16 tensor TFLOPS; ${GEFORCE_HALF}), 448 GB/s` }, names: ['geforce rtx 3070'], pciDeviceIds: [0x2484, 0x2488] }),
  curated({ classId: 'rtx-3060-ti-8gb', label: 'RTX 3060 Ti 8GB', model: 'NVIDIA GeForce RTX 3060 Ti', family: 'consumer', vramGiB: 8, architecture: 'ampere', peak: { matmulTflops: 32.4, memoryGBps: 448, source: `GA104 per-SM tensor rate × 38 SMs × 1665 MHz boost (${GEFORCE_HALF}), 448 GB/s` }, names: ['geforce rtx 3060 ti'], pciDeviceIds: [0x2486, 0x2489] }),
  curated({ classId: 'rtx-3060-12gb', label: 'RTX 3060 12GB', model: 'NVIDIA GeForce RTX 3060', family: 'consumer', vramGiB: 12, architecture: 'ampere', peak: { matmulTflops: 25.6, memoryGBps: 360, source: `GA106 per-SM tensor rate × 28 SMs × 1777 MHz boost (${GEFORCE_HALF}), 360 GB/s` }, names: ['geforce rtx 3060'], pciDeviceIds: [0x2503, 0x2504] }),

  // Ada Lovelace (8.9)
  curated({ classId: 'l40s-48gb', label: 'L40S 48GB', model: 'NVIDIA L40S', family: 'datacenter', vramGiB: 48, architecture: 'ada', peak: { matmulTflops: 362.05, memoryGBps: 864, source: 'L40S datasheet (362.05 FP16 tensor TFLOPS, 864 GB/s)' }, names: ['l40s'], pciDeviceIds: [0x26b9] }),
  curated({ classId: 'l40-48gb', label: 'L40 48GB', model: 'NVIDIA L40', family: 'datacenter', vramGiB: 48, architecture: 'ada', peak: { matmulTflops: 181.05, memoryGBps: 864, source: 'L40 datasheet (181.05 FP16 tensor TFLOPS, 864 GB/s)' }, names: ['l40'], pciDeviceIds: [0x26b5] }),
  curated({ classId: 'l4-24gb', label: 'L4 24GB', model: 'NVIDIA L4', family: 'datacenter', vramGiB: 24, architecture: 'ada', peak: { matmulTflops: 121, memoryGBps: 300, source: 'L4 datasheet (242 sparse FP16 tensor TFLOPS, halved; 300 GB/s)' }, names: ['l4'], pciDeviceIds: [0x27b8] }),
  curated({ classId: 'rtx-6000-ada-48gb', label: 'RTX 6000 Ada 48GB', model: 'NVIDIA RTX 6000 Ada Generation', family: 'workstation', vramGiB: 48, architecture: 'ada', peak: { matmulTflops: 364.2, memoryGBps: 960, source: 'Ada Lovelace architecture whitepaper (364.2 FP16 tensor TFLOPS with FP32 accumulate), 960 GB/s' }, names: ['rtx 6000 ada generation'], pciDeviceIds: [0x26b1] }),
  curated({ classId: 'rtx-5000-ada-32gb', label: 'RTX 5000 Ada 32GB', model: 'NVIDIA RTX 5000 Ada Generation', family: 'workstation', vramGiB: 32, architecture: 'ada', peak: { matmulTflops: 261.1, memoryGBps: 576, source: 'RTX 5000 Ada datasheet (1044.4 AI TFLOPS, FP8 sparse, ÷ 4), 576 GB/s' }, names: ['rtx 5000 ada generation'], pciDeviceIds: [0x26b2] }),
  curated({ classId: 'rtx-4000-ada-20gb', label: 'RTX 4000 Ada 20GB', model: 'NVIDIA RTX 4000 Ada Generation', family: 'workstation', vramGiB: 20, architecture: 'ada', peak: { matmulTflops: 81.9, memoryGBps: 360, source: 'RTX 4000 Ada datasheet (327.6 AI TFLOPS, FP8 sparse, ÷ 4), 360 GB/s' }, names: ['rtx 4000 ada generation'], pciDeviceIds: [0x27b2] }),
  curated({ classId: 'rtx-4000-sff-ada-20gb', label: 'RTX 4000 SFF Ada 20GB', model: 'NVIDIA RTX 4000 SFF Ada Generation', family: 'workstation', vramGiB: 20, architecture: 'ada', peak: { matmulTflops: 76.7, memoryGBps: 280, source: 'RTX 4000 SFF Ada datasheet (306.8 AI TFLOPS, FP8 sparse, ÷ 4; a 70 W card that may hold lower clocks under sustained load), 280 GB/s' }, names: ['rtx 4000 sff ada generation'], pciDeviceIds: [0x27b0] }),
  curated({ classId: 'rtx-4090-24gb', label: 'RTX 4090 24GB', model: 'NVIDIA GeForce RTX 4090', family: 'consumer', vramGiB: 24, architecture: 'ada', peak: { matmulTflops: 165.2, memoryGBps: 1008, source: 'Ada Lovelace architecture whitepaper (165.2 FP16 tensor TFLOPS with FP32 accumulate), 1008 GB/s' }, names: ['geforce rtx 4090'], pciDeviceIds: [0x2684] }),
  curated({ classId: 'rtx-4080-super-16gb', label: 'RTX 4080 Super 16GB', model: 'NVIDIA GeForce RTX 4080 SUPER', family: 'consumer', vramGiB: 16, architecture: 'ada', peak: { matmulTflops: 104.4, memoryGBps: 736, source: 'the RTX 4090\'s per-SM rate with FP32 accumulate × 80 SMs × 2550 MHz boost, 736 GB/s' }, names: ['geforce rtx 4080 super'], pciDeviceIds: [0x2702] }),
  curated({ classId: 'rtx-4080-16gb', label: 'RTX 4080 16GB', model: 'NVIDIA GeForce RTX 4080', family: 'consumer', vramGiB: 16, architecture: 'ada', peak: { matmulTflops: 97.5, memoryGBps: 716.8, source: 'Ada Lovelace architecture whitepaper (97.5 FP16 tensor TFLOPS with FP32 accumulate), 716.8 GB/s' }, names: ['geforce rtx 4080'], pciDeviceIds: [0x2704] }),
  curated({ classId: 'rtx-4070-ti-super-16gb', label: 'RTX 4070 Ti Super 16GB', model: 'NVIDIA GeForce RTX 4070 Ti SUPER', family: 'consumer', vramGiB: 16, architecture: 'ada', peak: { matmulTflops: 88.2, memoryGBps: 672, source: 'the RTX 4090\'s per-SM rate with FP32 accumulate × 66 SMs × 2610 MHz boost, 672 GB/s' }, names: ['geforce rtx 4070 ti super'], pciDeviceIds: [0x2705] }),
  curated({ classId: 'rtx-4070-ti-12gb', label: 'RTX 4070 Ti 12GB', model: 'NVIDIA GeForce RTX 4070 Ti', family: 'consumer', vramGiB: 12, architecture: 'ada', peak: { matmulTflops: 80.2, memoryGBps: 504, source: 'the RTX 4090\'s per-SM rate with FP32 accumulate × 60 SMs × 2610 MHz boost, 504 GB/s' }, names: ['geforce rtx 4070 ti'], pciDeviceIds: [0x2782] }),
  curated({ classId: 'rtx-4070-super-12gb', label: 'RTX 4070 Super 12GB', model: 'NVIDIA GeForce RTX 4070 SUPER', family: 'consumer', vramGiB: 12, architecture: 'ada', peak: { matmulTflops: 71, memoryGBps: 504, source: 'the RTX 4090\'s per-SM rate with FP32 accumulate × 56 SMs × 2475 MHz boost, 504 GB/s' }, names: ['geforce rtx 4070 super'], pciDeviceIds: [0x2783] }),
  curated({ classId: 'rtx-4070-12gb', label: 'RTX 4070 12GB', model: 'NVIDIA GeForce RTX 4070', family: 'consumer', vramGiB: 12, architecture: 'ada', peak: { matmulTflops: 58.3, memoryGBps: 504, source: 'the RTX 4090\'s per-SM rate with FP32 accumulate × 46 SMs × 2475 MHz boost, 504 GB/s' }, names: ['geforce rtx 4070'], pciDeviceIds: [0x2786] }),
  curated({ classId: 'rtx-4060-ti-16gb', label: 'RTX 4060 Ti 16GB', model: 'NVIDIA GeForce RTX 4060 Ti', family: 'consumer', vramGiB: 16, architecture: 'ada', peak: { matmulTflops: 44.1, memoryGBps: 288, source: 'the RTX 4090\'s per-SM rate with FP32 accumulate × 34 SMs × 2535 MHz boost, 288 GB/s' }, names: ['geforce rtx 4060 ti'], pciDeviceIds: [0x2805] }),

  // Hopper (9.0)
  curated({ classId: 'h100-80gb-sxm', label: 'H100 80GB SXM', model: 'NVIDIA H100 80GB HBM3', family: 'datacenter', vramGiB: 80, architecture: 'hopper', peak: { matmulTflops: 989.4, memoryGBps: 3350, source: 'H100 datasheet (1979 sparse FP16/BF16 TFLOPS, halved; 3.35 TB/s)' }, names: ['h100 80gb hbm3', 'h100 sxm5 80gb'], pciDeviceIds: [0x2330] }),
  curated({ classId: 'h100-80gb-pcie', label: 'H100 80GB PCIe', model: 'NVIDIA H100 PCIe', family: 'datacenter', vramGiB: 80, architecture: 'hopper', peak: { matmulTflops: 756.5, memoryGBps: 2000, source: 'H100 datasheet (1513 sparse FP16/BF16 TFLOPS, halved; 2 TB/s)' }, names: ['h100 pcie'], pciDeviceIds: [0x2331] }),
  curated({ classId: 'h100-nvl-94gb', label: 'H100 NVL 94GB', model: 'NVIDIA H100 NVL', family: 'datacenter', vramGiB: 94, architecture: 'hopper', peak: { matmulTflops: 835.5, memoryGBps: 3938, source: 'H100 NVL datasheet (1671 sparse FP16/BF16 TFLOPS, halved; 3.9 TB/s)' }, names: ['h100 nvl'], pciDeviceIds: [0x2321] }),
  curated({ classId: 'h200-141gb', label: 'H200 141GB', model: 'NVIDIA H200', family: 'datacenter', vramGiB: 141, architecture: 'hopper', peak: { matmulTflops: 989.4, memoryGBps: 4800, source: 'H200 datasheet (1979 sparse FP16/BF16 TFLOPS, halved; 4.8 TB/s)' }, names: ['h200'], pciDeviceIds: [0x2335] }),

  // Blackwell (10.0 datacenter, 12.0 workstation and GeForce)
  curated({ classId: 'b200-180gb', label: 'B200 180GB', model: 'NVIDIA B200', family: 'datacenter', vramGiB: 180, architecture: 'blackwell', peak: { matmulTflops: 2250, memoryGBps: 8000, source: 'HGX B200 datasheet (36 sparse FP16/BF16 PFLOPS for 8 GPUs: 2.25 dense per GPU; 64 TB/s for 8)' }, names: ['b200'], pciDeviceIds: [0x2901], minDriver: '570.133.20' }),
  curated({ classId: 'rtx-pro-6000-blackwell-96gb', label: 'RTX PRO 6000 Blackwell 96GB', model: 'NVIDIA RTX PRO 6000 Blackwell Workstation Edition', family: 'workstation', vramGiB: 96, architecture: 'blackwell', peak: { matmulTflops: 500, memoryGBps: 1792, source: 'RTX PRO 6000 Blackwell datasheet (4000 AI TOPS, FP4 sparse, ÷ 8), 1792 GB/s; the Server and Max-Q editions share the class' }, names: ['rtx pro 6000 blackwell workstation edition', 'rtx pro 6000 blackwell server edition', 'rtx pro 6000 blackwell max q workstation edition'], pciDeviceIds: [0x2bb1, 0x2bb4, 0x2bb5] }),
  curated({ classId: 'rtx-5090-32gb', label: 'RTX 5090 32GB', model: 'NVIDIA GeForce RTX 5090', family: 'consumer', vramGiB: 32, architecture: 'blackwell', peak: { matmulTflops: 209.5, memoryGBps: 1792, source: `RTX 5090 specifications (3352 AI TOPS, FP4 sparse, ÷ 8 = 419 FP16 TFLOPS; ${GEFORCE_HALF}), 1792 GB/s` }, names: ['geforce rtx 5090'], pciDeviceIds: [0x2b85] }),
  curated({ classId: 'rtx-5080-16gb', label: 'RTX 5080 16GB', model: 'NVIDIA GeForce RTX 5080', family: 'consumer', vramGiB: 16, architecture: 'blackwell', peak: { matmulTflops: 112.6, memoryGBps: 960, source: `RTX 5080 specifications (1801 AI TOPS, FP4 sparse, ÷ 8; ${GEFORCE_HALF}), 960 GB/s` }, names: ['geforce rtx 5080'], pciDeviceIds: [0x2c02] }),
  curated({ classId: 'rtx-5070-ti-16gb', label: 'RTX 5070 Ti 16GB', model: 'NVIDIA GeForce RTX 5070 Ti', family: 'consumer', vramGiB: 16, architecture: 'blackwell', peak: { matmulTflops: 87.9, memoryGBps: 896, source: `RTX 5070 Ti specifications (1406 AI TOPS, FP4 sparse, ÷ 8; ${GEFORCE_HALF}), 896 GB/s` }, names: ['geforce rtx 5070 ti'], pciDeviceIds: [0x2c05] }),
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

/** The curated class ids, in catalog order. */
export const gpuClassIds = GPU_CLASSES.map((c) => c.classId);

/** A curated class by id; derived classes are not in the catalog (see `isDerivedClassId`). */
export function findGpuClass(classId: string): GpuClass | undefined {
  return byId.get(classId);
}

/** Derived class ids: `derived-` and the product name and memory size in lower-case words. */
export const DERIVED_CLASS_ID = /^derived-[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const MAX_CLASS_ID_LENGTH = 64;

export function isDerivedClassId(classId: string): boolean {
  return classId.length <= MAX_CLASS_ID_LENGTH && DERIVED_CLASS_ID.test(classId);
}

/** A curated id, or one shaped like a derived id (whether such a class exists is the control plane's to say). */
export function isGpuClassIdShape(classId: string): boolean {
  return byId.has(classId) || isDerivedClassId(classId);
}

/**
 * An `nvidia-smi` product name as the catalog's `names` spell it: lower case, `-`, `_` and `/`
 * as spaces, single spaces, without the `NVIDIA ` prefix newer drivers add.
 *
 * @example normalizeGpuName('NVIDIA A100-SXM4-80GB') // 'a100 sxm4 80gb'
 */
export function normalizeGpuName(name: string): string {
  return name.toLowerCase().replace(/[-_/]+/g, ' ').replace(/\s+/g, ' ').trim().replace(/^nvidia /, '');
}

/** Memory sizes GPUs are sold with, GiB: a reported total is rounded up to the next one. */
const NOMINAL_SIZES_GIB = [1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 141, 180, 192, 256, 288];

/**
 * The size a vendor sells a GPU's memory as, GiB, from the total `nvidia-smi` reports: cards
 * report a little less than they are sold with (reserved memory), GDDR cards with ECC on about
 * 1/16 less (an A6000: 46068 MiB), so the total is rounded up to the next size GPUs are sold
 * with; past the list, up to a whole GiB.
 */
export function nominalMemoryGiB(vramBytes: number): number {
  const gib = vramBytes / GiB;
  return NOMINAL_SIZES_GIB.find((size) => size >= gib - 0.05) ?? Math.ceil(gib);
}

/** Whether a reported memory total is the class's memory (0.9 to 1.02 of its nominal size: ECC and reserved memory lower it). */
export function memoryFits(gpuClass: Pick<GpuClass, 'vramBytes'>, vramBytes: number): boolean {
  const ratio = vramBytes / gpuClass.vramBytes;
  return ratio >= 0.9 && ratio <= 1.02;
}

/** Names drivers print for a GPU whose model they do not know. */
const GENERIC_NAME = /^(graphics device|device|gpu|unknown|)$/;

export function isGenericGpuName(name: string): boolean {
  return GENERIC_NAME.test(normalizeGpuName(name));
}

/** The family a product name says: GeForce and TITAN consumer, Quadro and RTX workstation, the rest datacenter. */
export function familyFromName(name: string): GpuFamily {
  const n = normalizeGpuName(name);
  if (/\b(geforce|titan)\b/.test(n)) return 'consumer';
  if (/\b(quadro|rtx|ada generation)\b/.test(n) || /^t\d{3,4}\b/.test(n)) return 'workstation';
  return 'datacenter';
}

/** The reference figures of every curated class of a generation, lowest first: a derived class's yardstick. */
function generationFloor(architecture: GpuArchitecture): { matmulGflops: number; memoryBandwidthMbps: number } {
  const classes = GPU_CLASSES.filter((c) => c.architecture === architecture);
  return {
    matmulGflops: Math.min(...classes.map((c) => c.expectedMatmulGflops)),
    memoryBandwidthMbps: Math.min(...classes.map((c) => c.expectedMemoryBandwidthMbps)),
  };
}

const FLOORS = new Map(GPU_ARCHITECTURES.map((a) => [a, generationFloor(a)]));

/**
 * The class of a GPU no curated class matches. Its id comes from the product name and the
 * nominal memory size (`derived-nvidia-rtx-a2000-12gb`), so the same model gets the same id on
 * every farm; a generic name ("Graphics Device") is replaced by the PCI device id. Its figures
 * are its generation's floor: the lowest expected figures of the curated classes of that
 * generation, so a derived card at tier A performs at least like the weakest known card of its
 * generation (`gpuClassReference` caps its tier at A).
 */
export function derivedGpuClass(input: { name: string; vramBytes: number; architecture: GpuArchitecture; pciDeviceId: number | null }): GpuClass {
  const size = nominalMemoryGiB(input.vramBytes);
  const generic = isGenericGpuName(input.name);
  const device = input.pciDeviceId === null ? 'unknown' : input.pciDeviceId.toString(16).padStart(4, '0');
  const words = generic ? `nvidia device ${device}` : `nvidia ${normalizeGpuName(input.name)}`;
  let slug = words.replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
  const sizeToken = `${size}gb`;
  const tail = slug.split('-').includes(sizeToken) ? '' : `-${sizeToken}`;
  slug = slug.slice(0, MAX_CLASS_ID_LENGTH - 'derived-'.length - tail.length).replace(/-+$/, '');
  const floor = FLOORS.get(input.architecture)!;
  const generation = ARCHITECTURE_LABELS[input.architecture];
  const shortName = generic ? `NVIDIA GPU ${device}` : input.name.trim().replace(/^NVIDIA\s+/i, '');
  return {
    classId: `derived-${slug}${tail}`,
    label: new RegExp(`\\b${size}\\s?GB\\b`, 'i').test(shortName) ? shortName : `${shortName} ${size}GB`,
    model: generic ? `NVIDIA GPU (PCI device ${device})` : input.name.trim(),
    vendor: 'nvidia',
    family: generic ? 'datacenter' : familyFromName(input.name),
    vramBytes: size * GiB,
    expectedMatmulGflops: floor.matmulGflops,
    expectedMemoryBandwidthMbps: floor.memoryBandwidthMbps,
    figureSource: `derived class: no curated figures for this model; the ${generation} floor (the lowest expected matmul and memory figures of the curated ${generation} classes); its tier is at most A`,
    names: generic ? [] : [normalizeGpuName(input.name)],
    pciDeviceIds: input.pciDeviceId === null ? [] : [input.pciDeviceId],
    architecture: input.architecture,
    origin: 'derived',
  };
}

/** What a GPU's benchmark figures are compared with: its class's expected figures, and the best tier they can give. */
export interface GpuReference {
  matmulGflops: number;
  memoryBandwidthMbps: number;
  maxTier: 'S' | 'A';
}

/**
 * The reference of a class: a curated class's own figures (any tier), a derived class's
 * generation floor (tier A at most: being faster than the weakest known card of its
 * generation says nothing about being a fast card). Undefined for an unknown curated id, or a
 * derived id without an offered generation.
 */
export function gpuClassReference(classId: string, architecture: string | null | undefined): GpuReference | undefined {
  const cls = findGpuClass(classId);
  if (cls) return { matmulGflops: cls.expectedMatmulGflops, memoryBandwidthMbps: cls.expectedMemoryBandwidthMbps, maxTier: 'S' };
  if (!isDerivedClassId(classId) || !architecture) return undefined;
  const floor = FLOORS.get(architecture as GpuArchitecture);
  return floor ? { ...floor, maxTier: 'A' } : undefined;
}
