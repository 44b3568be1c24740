import { z } from 'zod';
import { isoTimeSchema, nonNegativeIntSchema } from '../schemas/common.js';
import { machineVerdict } from './machine-state.js';
import { fabricProblem, FABRIC_MANAGER_FIX, PERSISTENCE_MODE_FIX, PERSISTENCE_MODE_OFF } from './pre-offer.js';

/**
 * GPU health: the signals an agent reads for each GPU (`nvidia-smi -q -x` and the kernel's
 * `NVRM: Xid` lines) and the verdict they give. The verdict is a pure function of the report,
 * so the control plane recomputes it from what the agent sent, and the web app and
 * `gf-agent status` print the same words.
 *
 * - `healthy`: offered.
 * - `warning`: still offered, and shown with its reasons (a slowdown, a pending row remap).
 * - `failed`: not offered; a job running on it is failed as the machine's fault and refunded.
 */
export const GPU_HEALTH_VERDICTS = ['healthy', 'warning', 'failed'] as const;
export type GpuHealthVerdict = (typeof GPU_HEALTH_VERDICTS)[number];

const count = nonNegativeIntSchema.nullable();
const flag = z.boolean().nullable();

/** One XID code seen in the kernel log for this GPU since the agent started. */
export const gpuXidSchema = z.strictObject({
  code: z.int().min(0).max(100_000),
  count: z.int().min(1),
  lastAt: isoTimeSchema,
  /** The text after the code in the last such kernel line (process, details), cut short. */
  detail: z.string().max(200),
});
export type GpuXid = z.infer<typeof gpuXidSchema>;

/** Most XID codes one report carries (the most recent ones). */
export const MAX_REPORTED_XIDS = 16;

/**
 * The health inputs of one GPU (protocol 4, `heartbeat.gpuHealth`). Counters are what the
 * driver reports (null: not reported, such as ECC on a consumer card); nothing here is a
 * verdict, so the control plane judges with its own copy of the rules.
 */
export const gpuHealthReportSchema = z.strictObject({
  index: nonNegativeIntSchema,
  /** Null when the GPU was never read by this agent (it was lost before its first good read). */
  uuid: z.string().min(1).max(128).nullable(),
  /** `00000000:3B:00.0` as nvidia-smi prints it. */
  pciBusId: z.string().max(32).nullable(),
  /** nvidia-smi could not read the GPU at all (`Unknown Error`, `GPU is lost`); `lostReason` is its words. */
  lost: z.boolean(),
  lostReason: z.string().max(300).nullable(),
  ecc: z.strictObject({
    volatileCorrectable: count,
    volatileUncorrectable: count,
    aggregateCorrectable: count,
    aggregateUncorrectable: count,
  }),
  retiredPages: z.strictObject({ singleBit: count, doubleBit: count, pending: flag }),
  remappedRows: z.strictObject({ correctable: count, uncorrectable: count, pending: flag, failure: flag }),
  /** Active clock event (throttle) reasons that mean trouble; idle and application settings are left out. */
  clockEvents: z.strictObject({
    hwSlowdown: flag,
    hwThermalSlowdown: flag,
    hwPowerBrakeSlowdown: flag,
    swThermalSlowdown: flag,
    swPowerCap: flag,
  }),
  temperatureC: z.number().nullable(),
  slowdownTempC: z.number().nullable(),
  shutdownTempC: z.number().nullable(),
  fanPercent: z.number().min(0).nullable(),
  utilizationPercent: z.number().min(0).max(100).nullable(),
  pcie: z.strictObject({ currentGen: count, maxGen: count, currentWidth: count, maxWidth: count }),
  xids: z.array(gpuXidSchema).max(MAX_REPORTED_XIDS),
  /** Protocol 6 (absent before): `<persistence_mode>` Enabled or Disabled; null where not reported. */
  persistenceMode: flag.optional(),
  /**
   * Protocol 6 (absent before): the GPU's NVSwitch fabric (`<fabric><state>`, `<status>`), null
   * for a GPU without one (state `N/A`); see `fabricProblem`.
   */
  fabric: z.strictObject({ state: z.string().max(64).nullable(), status: z.string().max(128).nullable() }).nullable().optional(),
});
export type GpuHealthReport = z.infer<typeof gpuHealthReportSchema>;

/**
 * Changes when anything of the reports but the live figures (temperature, utilization, fan)
 * changes: the agent sends `heartbeat.gpuHealth` again when it does, the control plane stores
 * the reports when it does.
 */
export function gpuHealthCountersKey(reports: readonly GpuHealthReport[]): string {
  return JSON.stringify(reports.map(({ temperatureC: _t, utilizationPercent: _u, fanPercent: _f, ...counters }) => counters));
}

/** What one XID code means and what it does to the verdict (`ignore`: the job's own fault). */
export interface XidInfo {
  code: number;
  meaning: string;
  severity: 'failed' | 'warning' | 'ignore';
  /** What the operator can do. */
  action: string;
}

const xid = (code: number, severity: XidInfo['severity'], meaning: string, action: string): [number, XidInfo] => [code, { code, severity, meaning, action }];

/**
 * The XID codes the verdict knows (NVIDIA's XID catalog). Codes raised by a program's own bug
 * (bad memory access, a killed context) are ignored: the next job runs fine. An unknown code
 * warns, so it is seen without withdrawing the GPU.
 */
export const XID_TABLE: ReadonlyMap<number, XidInfo> = new Map([
  xid(13, 'ignore', 'graphics engine exception', 'usually a bug in the job; nothing to do unless it repeats across jobs'),
  xid(31, 'ignore', 'GPU memory page fault', 'usually a bug in the job; nothing to do unless it repeats across jobs'),
  xid(43, 'ignore', 'GPU stopped processing', 'usually a job that hung or was killed; nothing to do'),
  xid(45, 'ignore', 'preemptive cleanup after a program ended', 'nothing to do'),
  xid(48, 'failed', 'double-bit ECC error', 'drain the machine and reset the GPU (nvidia-smi -r) or reboot; replace it if it repeats'),
  xid(61, 'warning', 'internal micro-controller breakpoint', 'reset the GPU or reboot when idle; report it if it repeats'),
  xid(62, 'failed', 'internal micro-controller halted', 'reset the GPU (nvidia-smi -r) or reboot'),
  xid(63, 'warning', 'ECC page retirement or row remapping recorded', 'reset the GPU or reboot when idle so the remap takes effect'),
  xid(64, 'failed', 'ECC page retirement or row remapping failed', 'reset the GPU or reboot; replace it if it repeats'),
  xid(68, 'warning', 'video decoder exception', 'reset the GPU or reboot if it repeats'),
  xid(69, 'warning', 'graphics engine class error', 'reset the GPU or reboot if it repeats'),
  xid(74, 'warning', 'NVLink error', 'check the NVLink bridges and reset the GPUs when idle'),
  xid(79, 'failed', 'the GPU fell off the PCIe bus', 'reseat or replace it and check its power cables, then reboot'),
  xid(92, 'warning', 'high single-bit ECC error rate', 'watch it; replace the GPU if it goes on'),
  xid(94, 'warning', 'contained ECC error (the job on it was stopped)', 'reset the GPU or reboot when idle'),
  xid(95, 'failed', 'uncontained ECC error', 'reset the GPU (nvidia-smi -r) or reboot'),
  xid(119, 'failed', 'GSP firmware did not answer (RPC timeout)', 'reset the GPU or reboot; update the driver if it repeats'),
  xid(120, 'failed', 'GSP firmware error', 'reset the GPU or reboot; update the driver if it repeats'),
  xid(140, 'failed', 'unrecovered ECC error', 'reset the GPU (nvidia-smi -r) or reboot'),
  xid(154, 'failed', 'the driver asks for a GPU reset or a reboot to recover', 'reset the GPU or reboot as the kernel log says'),
]);

/** How long a warning XID keeps the GPU at `warning` after it was last seen. */
export const XID_WARNING_WINDOW_MS = 60 * 60 * 1000;
/** Retired pages at which NVIDIA considers a card for replacement (the table holds 64). */
export const RETIRED_PAGES_REPLACE_AT = 60;
/** PCIe generation is compared only under load: an idle link steps down to save power. */
export const PCIE_GEN_CHECK_MIN_UTILIZATION = 30;

export interface GpuVerdict {
  verdict: GpuHealthVerdict;
  /** Each problem in words: what, and what the operator can do. Empty when healthy. */
  reasons: string[];
}

/** The meaning of an XID code, for any code (an unknown one says so). */
export function describeXid(code: number): XidInfo {
  return XID_TABLE.get(code) ?? { code, severity: 'warning', meaning: 'an XID code this service does not know', action: "look it up in NVIDIA's XID catalog" };
}

/** The verdict of one GPU's report as of `now` (warning XIDs fade after `XID_WARNING_WINDOW_MS`). */
export function gpuHealthVerdict(report: GpuHealthReport, now: Date): GpuVerdict {
  const failed: string[] = [];
  const warned: string[] = [];
  if (report.lost) failed.push(`nvidia-smi cannot read the GPU (${report.lostReason ?? 'no reason given'}): reseat or replace it, then reboot`);
  for (const x of report.xids) {
    const info = describeXid(x.code);
    // How often is in the report, not the words: a repeat would otherwise store the verdict again.
    const text = `XID ${x.code}: ${info.meaning}; ${info.action}`;
    if (info.severity === 'failed') failed.push(text);
    else if (info.severity === 'warning' && now.getTime() - Date.parse(x.lastAt) < XID_WARNING_WINDOW_MS) warned.push(text);
  }
  const { ecc, retiredPages, remappedRows, clockEvents, pcie } = report;
  if ((ecc.volatileUncorrectable ?? 0) > 0) failed.push(`${ecc.volatileUncorrectable} uncorrectable (double-bit) ECC errors since the driver loaded: reset the GPU (nvidia-smi -r) or reboot; replace it if they return`);
  if (remappedRows.failure === true) failed.push('row remapping failed: the memory has no spare rows left; replace the GPU');
  const retired = (retiredPages.singleBit ?? 0) + (retiredPages.doubleBit ?? 0);
  if (retired >= RETIRED_PAGES_REPLACE_AT) failed.push(`${retired} memory pages retired: the retirement table is nearly full; replace the GPU`);
  const fabric = fabricProblem(report.fabric);
  if (fabric !== null) failed.push(`${fabric}; ${FABRIC_MANAGER_FIX}`);
  if (report.persistenceMode === false) warned.push(`${PERSISTENCE_MODE_OFF}; ${PERSISTENCE_MODE_FIX}`);
  if (remappedRows.pending === true) warned.push('a memory row remap is pending: reset the GPU or reboot when idle to apply it');
  if (retiredPages.pending === true) warned.push('a memory page retirement is pending: reset the GPU or reboot when idle to apply it');
  if (clockEvents.hwThermalSlowdown === true || clockEvents.swThermalSlowdown === true) warned.push('thermal slowdown: the GPU slows its clocks because it is too hot; check the airflow, fans and room temperature');
  if (clockEvents.hwSlowdown === true && clockEvents.hwThermalSlowdown !== true) warned.push('hardware slowdown: the GPU slows its clocks (power supply or temperature signal); check its power cables and PSU');
  if (clockEvents.hwPowerBrakeSlowdown === true) warned.push('power brake slowdown: the system asked the GPU to cut power; check the PSU');
  const temp = report.temperatureC;
  // The words leave out the live temperature: a verdict whose words change is stored again.
  if (temp !== null && report.shutdownTempC !== null && temp >= report.shutdownTempC) failed.push(`the temperature reached the shutdown threshold (${report.shutdownTempC} C): fix the cooling before it is offered again`);
  else if (temp !== null && report.slowdownTempC !== null && temp >= report.slowdownTempC) warned.push(`the temperature is at or above the slowdown threshold (${report.slowdownTempC} C): check the airflow and fans`);
  if (pcie.currentWidth !== null && pcie.maxWidth !== null && pcie.currentWidth < pcie.maxWidth) warned.push(`PCIe link runs at x${pcie.currentWidth} of x${pcie.maxWidth}: reseat the GPU or its riser`);
  const loaded = (report.utilizationPercent ?? 0) >= PCIE_GEN_CHECK_MIN_UTILIZATION;
  if (loaded && pcie.currentGen !== null && pcie.maxGen !== null && pcie.currentGen < pcie.maxGen) warned.push(`PCIe link runs at gen ${pcie.currentGen} of gen ${pcie.maxGen} under load: check the slot, riser and BIOS PCIe settings`);
  if (failed.length > 0) return { verdict: 'failed', reasons: [...failed, ...warned] };
  if (warned.length > 0) return { verdict: 'warning', reasons: warned };
  return { verdict: 'healthy', reasons: [] };
}

/**
 * What of a GPU's live figures `gpuHealthVerdict` reads, as a small number: the temperature
 * against the report's slowdown and shutdown thresholds, and, for a PCIe link below its
 * generation, whether the utilization reaches `PCIE_GEN_CHECK_MIN_UTILIZATION`. Reports that
 * differ only in their live temperature and utilization, with equal bands, get the same verdict
 * at the same moment; a control plane judging every heartbeat judges again only when a band
 * changes (or `verdictClockEdge` passes).
 */
export function liveFigureBand(report: Pick<GpuHealthReport, 'slowdownTempC' | 'shutdownTempC' | 'pcie'>, temperatureC: number | null, utilizationPercent: number | null): number {
  let heat = 0;
  if (temperatureC !== null && report.shutdownTempC !== null && temperatureC >= report.shutdownTempC) heat = 2;
  else if (temperatureC !== null && report.slowdownTempC !== null && temperatureC >= report.slowdownTempC) heat = 1;
  const { currentGen, maxGen } = report.pcie;
  // Utilization swings across the line all day: it counts only where the verdict reads it.
  const belowGen = currentGen !== null && maxGen !== null && currentGen < maxGen;
  return heat * 2 + (belowGen && (utilizationPercent ?? 0) >= PCIE_GEN_CHECK_MIN_UTILIZATION ? 1 : 0);
}

/**
 * The first moment (epoch ms) after `nowMs` at which the report's verdict changes with the
 * clock alone: the end of the window of a warning XID still open at `nowMs`
 * (`XID_WARNING_WINDOW_MS`). Infinity when none is open.
 */
export function verdictClockEdge(report: Pick<GpuHealthReport, 'xids'>, nowMs: number): number {
  let edge = Number.POSITIVE_INFINITY;
  for (const x of report.xids) {
    if (describeXid(x.code).severity !== 'warning') continue;
    const end = Date.parse(x.lastAt) + XID_WARNING_WINDOW_MS;
    if (end > nowMs && end < edge) edge = end;
  }
  return edge;
}

export interface MachineVerdict {
  verdict: GpuHealthVerdict;
  reasons: string[];
}

/**
 * A machine's verdict (`machineVerdict`'s rules), with its reasons: failed when the machine
 * itself is unhealthy (its agent says so) or no GPU is usable; warning when any GPU warns or
 * failed (the others are still offered); healthy otherwise.
 */
export function machineHealthVerdict(input: { machineUnhealthyReason: string | null; gpus: ReadonlyArray<{ index: number } & GpuVerdict> }): MachineVerdict {
  const verdict = machineVerdict({
    status: input.machineUnhealthyReason !== null ? 'unhealthy' : 'online',
    cordoned: false,
    drainRequested: false,
    gpus: input.gpus.length,
    failedGpus: input.gpus.filter((g) => g.verdict === 'failed').length,
    troubledGpus: input.gpus.filter((g) => g.verdict !== 'healthy').length,
    busy: false,
  });
  if (input.machineUnhealthyReason !== null) return { verdict, reasons: [input.machineUnhealthyReason] };
  if (input.gpus.length === 0) return { verdict, reasons: ['no GPU reported'] };
  const reasons = input.gpus.filter((g) => g.verdict !== 'healthy').map((g) => `GPU ${g.index} ${g.verdict}: ${g.reasons.join('; ')}`);
  return { verdict, reasons: verdict === 'failed' ? ['no GPU is usable', ...reasons] : reasons };
}

/** One line per GPU for terminals (`gf-agent status`): `GPU 0 GPU-… failed: XID 79: …`. */
export function gpuVerdictLine(g: { index: number; uuid: string | null } & GpuVerdict): string {
  return `GPU ${g.index} ${g.uuid ?? '(uuid unknown)'} ${g.verdict}${g.reasons.length > 0 ? `: ${g.reasons.join('; ')}` : ''}`;
}
