import { XMLParser } from 'fast-xml-parser';
import { GpufarmError } from '@gpufarm/shared';

/**
 * Parses `nvidia-smi -q -x` output (the `nvsmi_device_v*.dtd` XML, driver 470 to 550 and later)
 * into the figures the agent reports. Pure: text in, values out.
 *
 * Values arrive as text with units (`81559 MiB`, `31 C`, `12 %`, `71.05 W`) or `N/A`; `N/A`
 * and anything unparsable become null. The index is the position of the `<gpu>` element:
 * nvidia-smi lists GPUs in index (PCI bus) order. Power draw moved from `power_readings` (up to
 * v11 of the DTD) to `gpu_power_readings` (v12) and split into `average_`/`instant_power_draw`
 * (v13); all three are read.
 */
export interface NvidiaSmiGpu {
  index: number;
  uuid: string;
  name: string;
  vramBytes: number;
  temperatureC: number | null;
  utilizationPercent: number | null;
  memoryUsedBytes: number | null;
  powerDrawWatts: number | null;
  powerLimitWatts: number | null;
}

export interface NvidiaSmiReport {
  driverVersion: string;
  cudaVersion: string;
  gpus: NvidiaSmiGpu[];
}

type Node = Record<string, unknown>;

const parser = new XMLParser({
  ignoreAttributes: true,
  parseTagValue: false,
  trimValues: true,
  isArray: (tagName) => tagName === 'gpu',
});

const UNIT_BYTES: Record<string, number> = { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3, kb: 1000, mb: 1000 ** 2, gb: 1000 ** 3 };

function text(node: unknown): string | null {
  if (typeof node === 'string') return node === '' || node === 'N/A' ? null : node;
  if (typeof node === 'number') return String(node);
  return null;
}

function child(node: unknown, key: string): unknown {
  return node !== null && typeof node === 'object' ? (node as Node)[key] : undefined;
}

/** `"71.05 W"` -> 71.05; null for `N/A` or a value that is not a number followed by the unit. */
function withUnit(node: unknown, unit: string): number | null {
  const value = text(node);
  if (value === null) return null;
  const m = /^(-?\d+(?:\.\d+)?)\s*(\S*)$/.exec(value);
  if (!m || m[2]!.toLowerCase() !== unit.toLowerCase()) return null;
  return Number(m[1]);
}

/** `"81559 MiB"` -> bytes. */
function bytes(node: unknown): number | null {
  const value = text(node);
  if (value === null) return null;
  const m = /^(\d+(?:\.\d+)?)\s*([KMG]i?B|B)$/i.exec(value);
  if (!m) return null;
  const factor = UNIT_BYTES[m[2]!.toLowerCase()];
  return factor === undefined ? null : Math.round(Number(m[1]) * factor);
}

function firstNumber(...values: Array<number | null>): number | null {
  for (const v of values) if (v !== null) return v;
  return null;
}

/** Thrown when the text is not an `nvidia-smi -q -x` report the agent can use. */
export class NvidiaSmiParseError extends GpufarmError<'nvidia_smi_unreadable'> {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('nvidia_smi_unreadable', message, options);
  }
}

export function parseNvidiaSmiXml(xml: string): NvidiaSmiReport {
  let doc: Node;
  try {
    doc = parser.parse(xml) as Node;
  } catch (err) {
    throw new NvidiaSmiParseError(`nvidia-smi printed XML that does not parse: ${(err as Error).message}`, { cause: err });
  }
  const log = doc.nvidia_smi_log;
  if (log === undefined || log === null || typeof log !== 'object') throw new NvidiaSmiParseError('nvidia-smi output has no <nvidia_smi_log> element');
  const driverVersion = text(child(log, 'driver_version'));
  if (driverVersion === null) throw new NvidiaSmiParseError('nvidia-smi output has no driver version');
  const cudaVersion = text(child(log, 'cuda_version')) ?? 'unknown';
  const gpuNodes = (child(log, 'gpu') as unknown[] | undefined) ?? [];
  const gpus = gpuNodes.map((g, index): NvidiaSmiGpu => {
    const uuid = text(child(g, 'uuid'));
    const name = text(child(g, 'product_name'));
    const total = bytes(child(child(g, 'fb_memory_usage'), 'total'));
    if (uuid === null || name === null || total === null) throw new NvidiaSmiParseError(`GPU ${index} lacks its uuid, product name or memory total`);
    const modern = child(g, 'gpu_power_readings');
    const legacy = child(g, 'power_readings');
    return {
      index,
      uuid,
      name,
      vramBytes: total,
      temperatureC: withUnit(child(child(g, 'temperature'), 'gpu_temp'), 'C'),
      utilizationPercent: withUnit(child(child(g, 'utilization'), 'gpu_util'), '%'),
      memoryUsedBytes: bytes(child(child(g, 'fb_memory_usage'), 'used')),
      powerDrawWatts: firstNumber(
        withUnit(child(modern, 'power_draw'), 'W'),
        withUnit(child(modern, 'instant_power_draw'), 'W'),
        withUnit(child(modern, 'average_power_draw'), 'W'),
        withUnit(child(legacy, 'power_draw'), 'W'),
      ),
      powerLimitWatts: firstNumber(
        withUnit(child(modern, 'current_power_limit'), 'W'),
        withUnit(child(legacy, 'enforced_power_limit'), 'W'),
        withUnit(child(legacy, 'power_limit'), 'W'),
      ),
    };
  });
  return { driverVersion, cudaVersion, gpus };
}
