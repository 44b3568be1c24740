import {
  ARCHITECTURE_LABELS,
  MIN_COMPUTE_CAPABILITY,
  architectureOfComputeCapability,
  architectureOfDeviceId,
  architectureOfLabel,
  isOfferedArchitecture,
  nvidiaDeviceId,
  type GpuArchitecture,
  type NvidiaArchitecture,
} from './gpu-architectures.js';
import { GPU_CLASSES, derivedGpuClass, isGenericGpuName, memoryFits, normalizeGpuName, type GpuClass } from './gpu-classes.js';

/** What `nvidia-smi` says about one GPU that bears on its class. */
export interface GpuFacts {
  /** `product_name`, such as `NVIDIA H100 80GB HBM3` or `NVIDIA Graphics Device`. */
  name: string;
  /** `fb_memory_usage/total` in bytes. */
  vramBytes: number;
  /** `pci/pci_device_id` as printed (`0x233010DE`, or `233010DE` from older drivers); null when absent. */
  pciDeviceId: string | null;
  /** `nvidia-smi --query-gpu=compute_cap` (`9.0`); null where the driver has no such field. */
  computeCapability: string | null;
  /** `product_architecture` (`Hopper`, `Ada Lovelace`); null where the driver prints none. */
  productArchitecture: string | null;
}

/** A GPU's class and whether it is offered, with the reason when it is not. */
export type GpuClassification =
  | { offered: true; gpuClass: GpuClass; architecture: GpuArchitecture; computeCapability: string | null; reason: null }
  | { offered: false; gpuClass: null; architecture: NvidiaArchitecture | null; computeCapability: string | null; reason: string };

/**
 * Classifies one GPU (pure). Its generation comes from what cannot be renamed: the compute
 * capability the driver reports, else the PCI device id's chip (`NVIDIA_DEVICE_ID_RANGES`),
 * else the driver's `product_architecture`; a product name is never trusted alone, since a
 * driver older than the card prints "Graphics Device" and any name can be wrong. Then:
 *
 * - older than compute capability 7.5: not offered, with the reason;
 * - a curated class whose names hold the product name, of the same generation, whose memory
 *   fits: that class; else a curated class listing the PCI device id (an unnamed card);
 * - else a derived class of its generation (`derivedGpuClass`);
 * - no generation to be told: not offered, with the reason.
 */
export function classifyGpu(facts: GpuFacts): GpuClassification {
  const deviceId = facts.pciDeviceId === null ? null : nvidiaDeviceId(facts.pciDeviceId);
  const byId = deviceId === null ? null : architectureOfDeviceId(deviceId);
  const byCc = facts.computeCapability === null ? null : architectureOfComputeCapability(facts.computeCapability);
  const architecture = byCc ?? byId?.architecture ?? (facts.productArchitecture === null ? null : architectureOfLabel(facts.productArchitecture));
  const computeCapability = byCc !== null ? facts.computeCapability : (byId?.computeCapability ?? null);

  if (architecture === null) {
    return {
      offered: false,
      gpuClass: null,
      architecture: null,
      computeCapability,
      reason: `its generation cannot be told: nvidia-smi reports no compute capability${deviceId === null ? ', no NVIDIA PCI device id' : `, a PCI device id (0x${deviceId.toString(16)}) in no known range`} and no architecture, and a product name alone is not trusted; update the NVIDIA driver`,
    };
  }
  if (!isOfferedArchitecture(architecture)) {
    const cc = computeCapability === null ? 'below 7.5' : computeCapability;
    return {
      offered: false,
      gpuClass: null,
      architecture,
      computeCapability,
      reason: `compute capability ${cc} (${ARCHITECTURE_LABELS[architecture]}) is older than ${MIN_COMPUTE_CAPABILITY} (Turing), the oldest offered: CUDA 13 and the benchmark do not support it`,
    };
  }
  const fits = (c: GpuClass) => c.architecture === architecture && memoryFits(c, facts.vramBytes);
  const name = normalizeGpuName(facts.name);
  const named = isGenericGpuName(facts.name) ? undefined : GPU_CLASSES.find((c) => c.names.includes(name) && fits(c));
  const gpuClass = named ?? (deviceId === null ? undefined : GPU_CLASSES.find((c) => c.pciDeviceIds.includes(deviceId) && fits(c)));
  return {
    offered: true,
    gpuClass: gpuClass ?? derivedGpuClass({ name: facts.name, vramBytes: facts.vramBytes, architecture, pciDeviceId: deviceId }),
    architecture,
    computeCapability,
    reason: null,
  };
}
