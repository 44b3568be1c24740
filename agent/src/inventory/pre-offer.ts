import { DRIVER_MISMATCH_FIX, FABRIC_MANAGER_FIX, fabricProblem, PERSISTENCE_MODE_FIX, PERSISTENCE_MODE_OFF, reasonWithFix } from '@gpufarm/shared';
import { FABRIC_MANAGER_UNIT, sameDriverVersion, type DriverHostFacts } from './driver-host.js';
import type { GpuReading } from './gpu-reader.js';

/**
 * The pre-offer checks (pure): what must hold on the machine before its GPUs are offered,
 * beyond nvidia-smi listing them and the container probe seeing them. `gf-agent doctor` prints
 * each; a failed one makes the machine unhealthy (`preOfferFailure`, its reason carrying the
 * fix); a warning leaves it offered (persistence mode: the GPU health reports carry it to the
 * control plane, whose GPU verdict warns with the same words).
 */
export interface PreOfferCheck {
  name: string;
  status: 'ok' | 'warn' | 'fail' | 'skip';
  detail: string;
  fix: string | null;
}

/** `GPU 0, 1, 3` */
const gpuList = (indices: readonly number[]) => `GPU ${indices.join(', ')}`;

/**
 * The driver's kernel module against its user-space libraries: failed when nvidia-smi says they
 * differ ("Failed to initialize NVML: Driver/library version mismatch", a driver upgraded
 * without a reboot), with both versions where the host shows them; never "no GPU".
 */
export function driverLibraryCheck(reading: GpuReading | null, host: DriverHostFacts | null): PreOfferCheck {
  const name = 'driver libraries';
  const module = host?.kernelModuleVersion ?? null;
  if (reading !== null && !reading.ok && reading.driverMismatch) {
    const said = reading.driverMismatch.nvmlLibraryVersion;
    // The library nvidia-smi named, else the installed ones that are not the module's.
    const libraries = said ?? (host?.nvmlLibraryVersions.filter((v) => module === null || !sameDriverVersion(v, module)).join(', ') || null);
    return {
      name,
      status: 'fail',
      detail:
        `the NVIDIA kernel module${module ? ` (${module})` : ''} and the user-space libraries${libraries ? ` (${libraries})` : ''} are of different driver versions ` +
        '(nvidia-smi: "Failed to initialize NVML: Driver/library version mismatch"), as after a driver upgrade without a reboot: the GPUs cannot be used until they match',
      fix: DRIVER_MISMATCH_FIX,
    };
  }
  if (reading === null || !reading.ok) return { name, status: 'skip', detail: 'nvidia-smi did not run', fix: null };
  return { name, status: 'ok', detail: `kernel module and libraries are driver ${module ?? reading.report.driverVersion}`, fix: null };
}

/** Persistence mode on every GPU: a warning (still offered) for each GPU with it off. */
export function persistenceCheck(reading: GpuReading | null): PreOfferCheck {
  const name = 'persistence mode';
  if (reading === null || !reading.ok || reading.report.gpus.length === 0) return { name, status: 'skip', detail: 'no GPU was read', fix: null };
  const off = reading.report.gpus.filter((g) => g.health.persistenceMode === false).map((g) => g.index);
  if (off.length === 0) return { name, status: 'ok', detail: 'on (or not reported) for every GPU', fix: null };
  return { name, status: 'warn', detail: `${gpuList(off)}: ${PERSISTENCE_MODE_OFF} (the GPUs are still offered)`, fix: PERSISTENCE_MODE_FIX };
}

/**
 * The fabric manager of an NVSwitch system (HGX/DGX: a GPU reports an NVSwitch fabric, or the
 * kernel lists NVSwitches): failed while a GPU's fabric is not ready (state not `Completed` with
 * status `Success`) or while systemd says `nvidia-fabricmanager` is not active. Without systemd
 * (a container, another init) the fabric state alone decides. Skipped on other machines.
 */
export function fabricManagerCheck(reading: GpuReading | null, host: DriverHostFacts | null): PreOfferCheck {
  const name = 'fabric manager';
  if (reading === null || !reading.ok) return { name, status: 'skip', detail: 'nvidia-smi did not run', fix: null };
  const attached = reading.report.gpus.filter((g) => g.health.fabric !== null);
  const nvswitches = host?.nvswitchCount ?? 0;
  if (attached.length === 0 && nvswitches === 0) return { name, status: 'skip', detail: 'not an NVSwitch system (no GPU reports an NVSwitch fabric, the kernel lists no NVSwitch)', fix: null };
  const problems = new Map<string, number[]>();
  for (const g of attached) {
    const problem = fabricProblem(g.health.fabric);
    if (problem !== null) problems.set(problem, [...(problems.get(problem) ?? []), g.index]);
  }
  const said: string[] = [...problems].map(([problem, indices]) => `${gpuList(indices)}: ${problem}`);
  const unit = host?.fabricManager ?? null;
  if (unit?.kind === 'state' && unit.state !== 'active') said.push(`the ${FABRIC_MANAGER_UNIT} service is ${unit.state}`);
  const system = `an NVSwitch system (${[attached.length > 0 ? `${attached.length} GPU(s) with a fabric` : null, nvswitches > 0 ? `${nvswitches} NVSwitch(es)` : null].filter(Boolean).join(', ')})`;
  if (said.length > 0) return { name, status: 'fail', detail: `${system}: ${said.join('; ')}`, fix: FABRIC_MANAGER_FIX };
  const service = unit === null ? '' : unit.kind === 'state' ? `; ${FABRIC_MANAGER_UNIT} is active` : `; its service was not asked (${unit.detail})`;
  return { name, status: 'ok', detail: `${system}: the fabric is ready${service}`, fix: null };
}

/** Every pre-offer check, in the order an operator clears them. */
export function preOfferChecks(reading: GpuReading | null, host: DriverHostFacts | null): PreOfferCheck[] {
  return [driverLibraryCheck(reading, host), fabricManagerCheck(reading, host), persistenceCheck(reading)];
}

/** The machine's unhealthy reason from the first failed check (with its fix), or null. */
export function preOfferFailure(checks: readonly PreOfferCheck[]): string | null {
  const failed = checks.find((c) => c.status === 'fail');
  return failed ? reasonWithFix(failed.detail, failed.fix ?? 'see `gf-agent doctor`') : null;
}
