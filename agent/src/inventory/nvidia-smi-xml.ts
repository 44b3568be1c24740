import { XMLParser } from 'fast-xml-parser';
import { errorText, GpufarmError, type FabricInfo } from '@gpufarm/shared';

/**
 * Parses `nvidia-smi -q -x` output (the `nvsmi_device_v*.dtd` XML, driver 470 to 550 and later)
 * into the figures the agent reports. Pure: text in, values out.
 *
 * Values arrive as text with units (`81559 MiB`, `31 C`, `12 %`, `71.05 W`) or `N/A`; `N/A`
 * and anything unparsable become null. The index is the position of the `<gpu>` element:
 * nvidia-smi lists GPUs in index (PCI bus) order. Power draw moved from `power_readings` (up to
 * v11 of the DTD) to `gpu_power_readings` (v12) and split into `average_`/`instant_power_draw`
 * (v13); all three are read.
 *
 * Health figures: ECC counts come as `sram_`/`dram_(un)correctable` (Ampere and later; v13
 * splits SRAM uncorrectable into `_parity` and `_secded`) or `single_bit`/`double_bit` totals
 * (older cards); clock events as `clocks_event_reasons` (535 and later) or
 * `clocks_throttle_reasons`. A GPU the driver lost is printed before the XML as
 * `Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error` (and nvidia-smi
 * exits non-zero), or listed with `Unknown Error` in place of its values: both come back in
 * `lost`, and every GPU's index is its place in PCI bus order among all of them.
 * `persistence_mode` and the NVSwitch `fabric` (`state`, `status`: a value on Hopper and newer
 * GPUs of NVSwitch systems, `N/A` elsewhere) feed the pre-offer checks.
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
  /** `00000000:3B:00.0`, null when not printed. */
  pciBusId: string | null;
  /** `pci_device_id` as printed (`0x233010DE`; drivers before 400 print `15F710DE`), null when not printed. */
  pciDeviceId: string | null;
  /** `product_architecture` (`Hopper`, `Ada Lovelace`; drivers since 460 print it), null when not printed. */
  productArchitecture: string | null;
  /** Compute capability (`9.0`): not in the XML; the reader fills it from `--query-gpu=compute_cap` where the driver has it. */
  computeCapability: string | null;
  health: NvidiaSmiHealth;
}

/** A GPU's health figures as nvidia-smi prints them; null where the card or driver reports none. */
export interface NvidiaSmiHealth {
  ecc: { volatileCorrectable: number | null; volatileUncorrectable: number | null; aggregateCorrectable: number | null; aggregateUncorrectable: number | null };
  retiredPages: { singleBit: number | null; doubleBit: number | null; pending: boolean | null };
  remappedRows: { correctable: number | null; uncorrectable: number | null; pending: boolean | null; failure: boolean | null };
  clockEvents: { hwSlowdown: boolean | null; hwThermalSlowdown: boolean | null; hwPowerBrakeSlowdown: boolean | null; swThermalSlowdown: boolean | null; swPowerCap: boolean | null };
  slowdownTempC: number | null;
  shutdownTempC: number | null;
  fanPercent: number | null;
  pcie: { currentGen: number | null; maxGen: number | null; currentWidth: number | null; maxWidth: number | null };
  /** `<persistence_mode>`: Enabled, Disabled; null for `N/A` (drivers on Windows, some VMs). */
  persistenceMode: boolean | null;
  /** `<fabric>` on GPUs of an NVSwitch system (Hopper and newer report it); null for `N/A`. */
  fabric: FabricInfo | null;
}

/** A GPU nvidia-smi knows of but cannot read: fallen off the bus, or a driver that lost it. */
export interface NvidiaSmiLostGpu {
  index: number;
  pciBusId: string | null;
  reason: string;
}

export interface NvidiaSmiReport {
  driverVersion: string;
  cudaVersion: string;
  gpus: NvidiaSmiGpu[];
  lost: NvidiaSmiLostGpu[];
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

/** `"16x"` or `"4"` -> 16 / 4. */
function integer(node: unknown): number | null {
  const value = text(node);
  if (value === null) return null;
  const m = /^(\d+)x?$/i.exec(value);
  return m ? Number(m[1]) : null;
}

/** `Yes`/`No`, `Active`/`Not Active`. */
function yesNo(node: unknown): boolean | null {
  const value = text(node)?.toLowerCase();
  if (value === 'yes' || value === 'active') return true;
  if (value === 'no' || value === 'not active') return false;
  return null;
}

/** Sum of the counters that are reported; null when none is. */
function sum(...values: Array<number | null>): number | null {
  const known = values.filter((v): v is number => v !== null);
  return known.length === 0 ? null : known.reduce((a, b) => a + b, 0);
}

/** The correctable and uncorrectable counts of one `ecc_errors` section (`volatile` or `aggregate`). */
function eccCounts(section: unknown): { correctable: number | null; uncorrectable: number | null } {
  const sramUnc = integer(child(section, 'sram_uncorrectable')) ?? sum(integer(child(section, 'sram_uncorrectable_parity')), integer(child(section, 'sram_uncorrectable_secded')));
  const correctable = sum(integer(child(section, 'sram_correctable')), integer(child(section, 'dram_correctable')), integer(child(child(section, 'single_bit'), 'total')));
  const uncorrectable = sum(sramUnc, integer(child(section, 'dram_uncorrectable')), integer(child(child(section, 'double_bit'), 'total')));
  return { correctable, uncorrectable };
}

/** A clock event reason under either element name (`clocks_event_reason_X`, `clocks_throttle_reason_X`). */
function clockEvent(g: unknown, reason: string): boolean | null {
  return yesNo(child(child(g, 'clocks_event_reasons'), `clocks_event_reason_${reason}`)) ?? yesNo(child(child(g, 'clocks_throttle_reasons'), `clocks_throttle_reason_${reason}`));
}

/** `Enabled`/`Disabled`. */
function enabled(node: unknown): boolean | null {
  const value = text(node)?.toLowerCase();
  return value === 'enabled' ? true : value === 'disabled' ? false : null;
}

/** A GPU's `<fabric>`: null when its state is `N/A` or `Not Supported` (no NVSwitch fabric). */
function fabricOf(g: unknown): FabricInfo | null {
  const fabric = child(g, 'fabric');
  const state = text(child(fabric, 'state'));
  if (state === null || /^not supported$/i.test(state)) return null;
  return { state: state.slice(0, 64), status: text(child(fabric, 'status'))?.slice(0, 128) ?? null };
}

function healthOf(g: unknown): NvidiaSmiHealth {
  const ecc = child(g, 'ecc_errors');
  const vol = eccCounts(child(ecc, 'volatile'));
  const agg = eccCounts(child(ecc, 'aggregate'));
  const retired = child(g, 'retired_pages');
  const remapped = child(g, 'remapped_rows');
  const temperature = child(g, 'temperature');
  const link = child(child(g, 'pci'), 'pci_gpu_link_info');
  return {
    ecc: { volatileCorrectable: vol.correctable, volatileUncorrectable: vol.uncorrectable, aggregateCorrectable: agg.correctable, aggregateUncorrectable: agg.uncorrectable },
    retiredPages: {
      singleBit: integer(child(child(retired, 'multiple_single_bit_retirement'), 'retired_count')),
      doubleBit: integer(child(child(retired, 'double_bit_retirement'), 'retired_count')),
      pending: yesNo(child(retired, 'pending_retirement')) ?? yesNo(child(retired, 'pending_blacklist')),
    },
    remappedRows: {
      correctable: integer(child(remapped, 'remapped_row_corr')),
      uncorrectable: integer(child(remapped, 'remapped_row_unc')),
      pending: yesNo(child(remapped, 'remapped_row_pending')),
      failure: yesNo(child(remapped, 'remapped_row_failure')),
    },
    clockEvents: {
      hwSlowdown: clockEvent(g, 'hw_slowdown'),
      hwThermalSlowdown: clockEvent(g, 'hw_thermal_slowdown'),
      hwPowerBrakeSlowdown: clockEvent(g, 'hw_power_brake_slowdown'),
      swThermalSlowdown: clockEvent(g, 'sw_thermal_slowdown'),
      swPowerCap: clockEvent(g, 'sw_power_cap'),
    },
    slowdownTempC: withUnit(child(temperature, 'gpu_temp_slow_threshold'), 'C'),
    shutdownTempC: withUnit(child(temperature, 'gpu_temp_max_threshold'), 'C'),
    fanPercent: withUnit(child(g, 'fan_speed'), '%'),
    pcie: {
      currentGen: integer(child(child(link, 'pcie_gen'), 'current_link_gen')),
      maxGen: integer(child(child(link, 'pcie_gen'), 'max_link_gen')),
      currentWidth: integer(child(child(link, 'link_widths'), 'current_link_width')),
      maxWidth: integer(child(child(link, 'link_widths'), 'max_link_width')),
    },
    persistenceMode: enabled(child(g, 'persistence_mode')),
    fabric: fabricOf(g),
  };
}

/** nvidia-smi's words for a GPU it cannot read, in place of a value. */
const LOST_VALUE = /^(Unknown Error|GPU is lost|GPU requires reset|ERR!)/i;
/** The line nvidia-smi prints (before any XML) for each GPU whose handle it cannot get. */
const LOST_LINE = /^Unable to determine the device handle for GPU\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]):\s*(.+)$/;

/** A PCI bus id in one spelling whatever the domain width or case: `0000:3b:00.0`. */
export function normalizePciBusId(id: string): string | null {
  const m = /^(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?$/i.exec(id.trim());
  if (!m) return null;
  const hex = (v: string | undefined, width: number) => parseInt(v ?? '0', 16).toString(16).padStart(width, '0');
  return `${hex(m[1], 4)}:${hex(m[2], 2)}:${hex(m[3], 2)}.${m[4] ?? '0'}`;
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

export function parseNvidiaSmiXml(output: string): NvidiaSmiReport {
  const lostLines: Array<{ pciBusId: string; reason: string }> = [];
  for (const line of output.slice(0, Math.max(0, output.indexOf('<'))).split('\n')) {
    const m = LOST_LINE.exec(line.trim());
    if (m) lostLines.push({ pciBusId: m[1]!, reason: m[2]!.trim().slice(0, 300) });
  }
  const xml = output.indexOf('<') >= 0 ? output.slice(output.indexOf('<')) : output;
  let doc: Node;
  try {
    doc = parser.parse(xml) as Node;
  } catch (err) {
    throw new NvidiaSmiParseError(`nvidia-smi printed XML that does not parse: ${errorText(err)}`, { cause: err });
  }
  const log = doc.nvidia_smi_log;
  if (log === undefined || log === null || typeof log !== 'object') throw new NvidiaSmiParseError('nvidia-smi output has no <nvidia_smi_log> element');
  const driverVersion = text(child(log, 'driver_version'));
  if (driverVersion === null) throw new NvidiaSmiParseError('nvidia-smi output has no driver version');
  const cudaVersion = text(child(log, 'cuda_version')) ?? 'unknown';
  const gpuNodes = (child(log, 'gpu') as unknown[] | undefined) ?? [];
  type Listed = { kind: 'gpu'; node: unknown; busId: string | null } | { kind: 'lost'; busId: string | null; reason: string };
  const listed: Listed[] = gpuNodes.map((node): Listed => {
    const busId = text(child(child(node, 'pci'), 'pci_bus_id'));
    const uuidText = text(child(node, 'uuid')) ?? '';
    const lostWords = [uuidText, text(child(node, 'product_name')) ?? ''].find((v) => LOST_VALUE.test(v));
    return lostWords !== undefined ? { kind: 'lost', busId, reason: lostWords } : { kind: 'gpu', node, busId };
  });
  for (const l of lostLines) listed.push({ kind: 'lost', busId: l.pciBusId, reason: l.reason });
  // nvidia-smi numbers GPUs in PCI bus order; a lost GPU keeps its place so the others keep their index.
  const busKey = (l: Listed) => (l.busId === null ? null : normalizePciBusId(l.busId));
  if (lostLines.length > 0) listed.sort((a, b) => (busKey(a) ?? '').localeCompare(busKey(b) ?? ''));
  const lost: NvidiaSmiLostGpu[] = [];
  const gpus: NvidiaSmiGpu[] = [];
  listed.forEach((l, index) => {
    if (l.kind === 'lost') {
      lost.push({ index, pciBusId: l.busId, reason: l.reason });
      return;
    }
    gpus.push(readGpu(l.node, index));
  });
  return { driverVersion, cudaVersion, gpus, lost };
}

function readGpu(g: unknown, index: number): NvidiaSmiGpu {
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
    pciBusId: text(child(child(g, 'pci'), 'pci_bus_id')),
    pciDeviceId: text(child(child(g, 'pci'), 'pci_device_id')),
    productArchitecture: text(child(g, 'product_architecture')),
    computeCapability: null,
    health: healthOf(g),
  };
}
