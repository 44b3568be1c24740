/**
 * NVIDIA GPU generations: which are offered, the oldest driver each is offered with, the
 * compute capability of each, and how a GPU's generation is told from what `nvidia-smi`
 * prints. Pure data and lookups.
 *
 * The marketplace offers compute capability 7.5 (Turing) and newer: what CUDA 13 supports and
 * what the benchmark program is built for. Older generations are recognized only to say why
 * such a card is not offered.
 */

/** Every NVIDIA generation the agent can name, oldest first. */
export const NVIDIA_ARCHITECTURES = ['kepler', 'maxwell', 'pascal', 'volta', 'turing', 'ampere', 'ada', 'hopper', 'blackwell'] as const;
export type NvidiaArchitecture = (typeof NVIDIA_ARCHITECTURES)[number];

/** The generations that are offered (compute capability 7.5 and newer), oldest first. */
export const GPU_ARCHITECTURES = ['turing', 'ampere', 'ada', 'hopper', 'blackwell'] as const;
export type GpuArchitecture = (typeof GPU_ARCHITECTURES)[number];

/** The oldest compute capability offered: CUDA 13's floor. */
export const MIN_COMPUTE_CAPABILITY = '7.5';

/** How NVIDIA names each generation (`nvidia-smi`'s `product_architecture` prints these). */
export const ARCHITECTURE_LABELS: Readonly<Record<NvidiaArchitecture, string>> = {
  kepler: 'Kepler',
  maxwell: 'Maxwell',
  pascal: 'Pascal',
  volta: 'Volta',
  turing: 'Turing',
  ampere: 'Ampere',
  ada: 'Ada Lovelace',
  hopper: 'Hopper',
  blackwell: 'Blackwell',
};

export function isOfferedArchitecture(architecture: string): architecture is GpuArchitecture {
  return (GPU_ARCHITECTURES as readonly string[]).includes(architecture);
}

/**
 * The oldest NVIDIA Linux driver a machine of each generation is offered with. Job images are
 * CUDA 12 images, which need 525.60.13 at least; Hopper needs the R535 branch, the first
 * production branch with its full CUDA 12.2 support (FP8 matmuls, confidential computing off);
 * Blackwell needs R570, the first branch that supports it (570.86.15 is R570's first
 * production release, with CUDA 12.8). A class may ask for more (`GpuClass.minDriver`).
 */
export const MIN_DRIVER_BY_ARCHITECTURE: Readonly<Record<GpuArchitecture, string>> = {
  turing: '525.60.13',
  ampere: '525.60.13',
  ada: '525.60.13',
  hopper: '535.54.03',
  blackwell: '570.86.15',
};

/** `"8.6"` → `[8, 6]`; null for anything else. */
export function parseComputeCapability(text: string): [number, number] | null {
  const m = /^(\d{1,2})\.(\d{1,2})$/.exec(text.trim());
  return m ? [Number(m[1]), Number(m[2])] : null;
}

/** Negative when `a` is older than `b`, 0 when equal, positive when newer. */
export function compareComputeCapability(a: string, b: string): number {
  const left = parseComputeCapability(a) ?? [0, 0];
  const right = parseComputeCapability(b) ?? [0, 0];
  return left[0] - right[0] || left[1] - right[1];
}

/**
 * The generation of a compute capability (3.x Kepler … 10.x and 12.x Blackwell). A major
 * version above the newest known one belongs to a GPU newer than this table: it is counted as
 * the newest offered generation, whose driver minimum and reference figures are the best known.
 */
export function architectureOfComputeCapability(cc: string): NvidiaArchitecture | null {
  const parsed = parseComputeCapability(cc);
  if (!parsed) return null;
  const [major, minor] = parsed;
  if (major === 3) return 'kepler';
  if (major === 5) return 'maxwell';
  if (major === 6) return 'pascal';
  if (major === 7) return minor >= 5 ? 'turing' : 'volta';
  if (major === 8) return minor === 9 ? 'ada' : 'ampere';
  if (major === 9) return 'hopper';
  if (major >= 10) return 'blackwell';
  return null;
}

/** A range of PCI device ids (the upper 16 bits of `nvidia-smi`'s `pci_device_id`, vendor 10DE). */
interface DeviceIdRange {
  from: number;
  to: number;
  chip: string;
  architecture: NvidiaArchitecture;
  computeCapability: string;
}

/**
 * PCI device id ranges of NVIDIA's GPU chips, from the PCI ID database (pci-ids.ucw.cz, vendor
 * 10de) grouped by chip. Each chip family takes a block of ids; a card's id falls in its
 * chip's block whatever its marketing name, which is what makes it trustworthy when an old
 * driver prints "Graphics Device". Ranges are inclusive and do not overlap.
 */
export const NVIDIA_DEVICE_ID_RANGES: readonly DeviceIdRange[] = [
  { from: 0x0fc0, to: 0x0fff, chip: 'GK107', architecture: 'kepler', computeCapability: '3.0' },
  { from: 0x1000, to: 0x103f, chip: 'GK110/GK210', architecture: 'kepler', computeCapability: '3.5' },
  { from: 0x1180, to: 0x11ff, chip: 'GK104/GK106', architecture: 'kepler', computeCapability: '3.0' },
  { from: 0x1280, to: 0x12bf, chip: 'GK208', architecture: 'kepler', computeCapability: '3.5' },
  { from: 0x1340, to: 0x13bf, chip: 'GM107/GM108', architecture: 'maxwell', computeCapability: '5.0' },
  { from: 0x13c0, to: 0x143f, chip: 'GM204/GM206', architecture: 'maxwell', computeCapability: '5.2' },
  { from: 0x15f0, to: 0x15ff, chip: 'GP100', architecture: 'pascal', computeCapability: '6.0' },
  { from: 0x17c0, to: 0x17ff, chip: 'GM200', architecture: 'maxwell', computeCapability: '5.2' },
  { from: 0x1b00, to: 0x1d7f, chip: 'GP102/GP104/GP106/GP107/GP108', architecture: 'pascal', computeCapability: '6.1' },
  { from: 0x1d80, to: 0x1dff, chip: 'GV100', architecture: 'volta', computeCapability: '7.0' },
  { from: 0x1e00, to: 0x1fff, chip: 'TU102/TU104/TU106/TU117', architecture: 'turing', computeCapability: '7.5' },
  { from: 0x2080, to: 0x20ff, chip: 'GA100', architecture: 'ampere', computeCapability: '8.0' },
  { from: 0x2180, to: 0x21ff, chip: 'TU116', architecture: 'turing', computeCapability: '7.5' },
  { from: 0x2200, to: 0x22ff, chip: 'GA102', architecture: 'ampere', computeCapability: '8.6' },
  { from: 0x2300, to: 0x237f, chip: 'GH100', architecture: 'hopper', computeCapability: '9.0' },
  { from: 0x2400, to: 0x25ff, chip: 'GA103/GA104/GA106/GA107', architecture: 'ampere', computeCapability: '8.6' },
  { from: 0x2680, to: 0x28ff, chip: 'AD102/AD103/AD104/AD106/AD107', architecture: 'ada', computeCapability: '8.9' },
  { from: 0x2900, to: 0x29ff, chip: 'GB100/GB102', architecture: 'blackwell', computeCapability: '10.0' },
  { from: 0x2b00, to: 0x2fff, chip: 'GB202/GB203/GB205/GB206/GB207', architecture: 'blackwell', computeCapability: '12.0' },
];

/** Ids above every range belong to chips newer than this table. */
const NEWEST_KNOWN_ID = Math.max(...NVIDIA_DEVICE_ID_RANGES.map((r) => r.to));

/**
 * The 16-bit device id of `nvidia-smi`'s `pci_device_id`: `0x233010DE` (driver 400 and later)
 * or `15F710DE` (older) → 0x2330 / 0x15f7. Null unless the vendor part is NVIDIA's 10DE.
 */
export function nvidiaDeviceId(pciDeviceId: string): number | null {
  const m = /^(?:0x)?([0-9a-f]{4})(10de)$/i.exec(pciDeviceId.trim());
  return m ? parseInt(m[1]!, 16) : null;
}

/** What a device id says: its chip's generation and compute capability, or null for an id in no range. */
export function architectureOfDeviceId(deviceId: number): { architecture: NvidiaArchitecture; computeCapability: string | null; chip: string } | null {
  const range = NVIDIA_DEVICE_ID_RANGES.find((r) => deviceId >= r.from && deviceId <= r.to);
  if (range) return { architecture: range.architecture, computeCapability: range.computeCapability, chip: range.chip };
  // Newer than the table: the newest offered generation, compute capability unknown.
  if (deviceId > NEWEST_KNOWN_ID) return { architecture: 'blackwell', computeCapability: null, chip: 'newer than the device id table' };
  return null;
}

/** `nvidia-smi`'s `product_architecture` (`Ada Lovelace`, `Hopper`, …) as a generation; null for `Unknown` or anything else. */
export function architectureOfLabel(label: string): NvidiaArchitecture | null {
  const text = label.trim().toLowerCase();
  for (const a of NVIDIA_ARCHITECTURES) if (ARCHITECTURE_LABELS[a].toLowerCase() === text || a === text) return a;
  return null;
}
