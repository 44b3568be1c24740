import { compareDriverVersions, findGpuClass, isOfferedArchitecture, MIN_DRIVER_BY_ARCHITECTURE, minDriverFor } from '../catalog/gpu-classes.js';
import { z } from 'zod';
import { formatUsdCents } from '../money.js';
import { splitReasonFix } from './pre-offer.js';

/**
 * The operator's "earning / not earning" verdict for one machine: a pure function of what the
 * control plane knows of it. The first blocker that keeps the machine from being rented wins,
 * in the order the operator has to clear them (farm, link, drain, GPUs, driver, price,
 * verification); each names its fix in words an operator acts on. `rented` and `offered` are
 * earning: the machine is in the market, nothing is left to fix (`offered` waits for a job).
 * The operator area's pages and `gf-agent status` print the same verdict.
 */

export const EARNING_CODES = [
  'rented',
  'offered',
  'offline',
  'probe_failed',
  'gpu_failed',
  'unhealthy',
  'driver_too_old',
  'no_price',
  'draining',
  'cordoned',
  'farm_quarantined',
  'tier_unverified',
] as const;
export type EarningCode = (typeof EARNING_CODES)[number];

export const earningVerdictSchema = z.strictObject({
  earning: z.boolean(),
  code: z.enum(EARNING_CODES),
  /** What keeps the machine from earning, or what it earns at. */
  reason: z.string(),
  /** What the operator does about it; null when nothing is to be done. */
  fix: z.string().nullable(),
  /** Since when the verdict holds, when known (ISO time). */
  since: z.string().nullable(),
});
export type EarningVerdict = z.infer<typeof earningVerdictSchema>;

/** A GPU's health verdict, as the GPU-health signals give it (`shared/src/fleet/gpu-health.ts`). */
export type EarningGpuHealth = 'healthy' | 'warning' | 'failed';

export interface EarningFacts {
  /** `machines.status`: the agent's report, the liveness sweep's `offline`, an operator's `disabled`. */
  status: 'online' | 'offline' | 'unhealthy' | 'draining' | 'disabled';
  lastHeartbeatAt: string | null;
  offlineSince: string | null;
  /** Set once the machine's agent unenrolled it. */
  unenrolledAt: string | null;
  /** The agent's reason when it reports the machine unhealthy. */
  healthReason: string | null;
  /** The GPU container probe's state and what it said. */
  probe: { state: string | null; output: string | null };
  /** Offered GPUs with their health (healthy when no health signal is known). */
  gpus: ReadonlyArray<{ index: number; classId: string; verdict: EarningGpuHealth; reasons: readonly string[] }>;
  driverVersion: string | null;
  pricePerGpuHourMicroUsd: number | null;
  drainRequested: boolean;
  /** Who asked for the drain (an admin's is lifted by an admin only); absent or null: unknown or none. */
  drainSetBy?: 'admin' | 'operator' | null;
  cordoned: boolean;
  farmStatus: string;
  /** Machine verification: whether its GPUs passed a GPU challenge (the reason names the failed one). */
  verification: 'unverified' | 'verifying' | 'verified' | 'failed';
  verificationReason: string | null;
  /** The job running on the machine now, if any, and since when. */
  currentJob: { jobId: string; since: string | null } | null;
  /** Going prices of the machine's classes (median of the offers), for the `offered` line. */
  goingPrices?: ReadonlyArray<{ classId: string; medianPerGpuHourMicroUsd: number | null }>;
  /**
   * The machine's classes as the control plane lists them (derived classes are not in the
   * shared catalog): their labels and generations, for the lines and the driver check.
   */
  classes?: ReadonlyArray<{ classId: string; label: string; architecture: string | null }>;
  /** GPUs the agent detected but does not offer, with why (an old generation, say). */
  notOffered?: ReadonlyArray<{ index: number; name: string; reason: string }>;
}

const DOCTOR = 'then run `gf-agent doctor` on the machine';

function verdict(code: EarningCode, reason: string, fix: string | null, since: string | null = null): EarningVerdict {
  return { earning: code === 'rented' || code === 'offered', code, reason, fix, since };
}

function firstLine(text: string): string {
  return text.split('\n').map((l) => l.trim()).find((l) => l.length > 0) ?? '';
}

/** The probe's own words, without the agent's "GPU container probe failed:" prefix. */
function probeMessage(output: string | null): string {
  const line = firstLine(output ?? '').replace(/^GPU container probe failed:\s*/i, '');
  return line.length > 0 ? line : 'no output';
}

function classLabel(facts: Pick<EarningFacts, 'classes'>, classId: string): string {
  return findGpuClass(classId)?.label ?? facts.classes?.find((c) => c.classId === classId)?.label ?? classId;
}

/** The oldest driver a class is offered with; null for a class nothing is known of. */
function classMinDriver(facts: Pick<EarningFacts, 'classes'>, classId: string): string | null {
  const curated = findGpuClass(classId);
  if (curated) return minDriverFor(curated);
  const architecture = facts.classes?.find((c) => c.classId === classId)?.architecture;
  return architecture && isOfferedArchitecture(architecture) ? MIN_DRIVER_BY_ARCHITECTURE[architecture] : null;
}

/** `GPU 0 (NVIDIA GeForce GTX 1080 Ti): compute capability 6.1 …` for each GPU that is not offered. */
function notOfferedText(facts: Pick<EarningFacts, 'notOffered'>): string {
  return (facts.notOffered ?? []).map((g) => `GPU ${g.index} (${g.name}): ${g.reason}`).join('; ');
}

function usd(micro: number): string {
  return `$${formatUsdCents(micro)}`;
}

function probeFix(output: string): string {
  if (/not on this machine|docker pull/i.test(output)) return `Pull the probe image as the message says, ${DOCTOR}.`;
  if (/could not select device driver|unknown or invalid runtime|nvidia-ctk|container toolkit|could not be started/i.test(output)) {
    return `Install nvidia-container-toolkit, run \`nvidia-ctk runtime configure --runtime=docker\` and restart docker, ${DOCTOR}.`;
  }
  if (/sees \d+ of \d+ GPUs/i.test(output)) return `Check that no GPU is hidden from containers (CUDA_VISIBLE_DEVICES, cgroup device rules) and restart docker, ${DOCTOR}.`;
  return `Install nvidia-container-toolkit and restart docker, ${DOCTOR}.`;
}

/** The verdict for one machine's facts. */
export function earningVerdict(facts: EarningFacts): EarningVerdict {
  if (facts.currentJob) {
    return verdict('rented', `Rented: job ${facts.currentJob.jobId} is running.`, null, facts.currentJob.since);
  }
  if (facts.farmStatus !== 'active') {
    return verdict('farm_quarantined', `The farm is ${facts.farmStatus === 'quarantined' ? 'quarantined' : facts.farmStatus} by the service: none of its machines is offered.`, 'Contact the service\'s support to lift it; running jobs finish meanwhile.');
  }
  if (facts.unenrolledAt !== null) {
    return verdict('offline', 'Unenrolled: the machine\'s token was revoked and it is offered nowhere.', 'Enroll it again with a new enrollment token (`gf-agent enroll`).', facts.unenrolledAt);
  }
  if (facts.status === 'offline' || facts.status === 'disabled') {
    const since = facts.offlineSince ?? facts.lastHeartbeatAt;
    const reason = facts.status === 'disabled'
      ? 'Disabled: the machine\'s link is refused.'
      : facts.lastHeartbeatAt === null
        ? 'Offline: the agent never connected.'
        : 'Offline: no heartbeat from the agent.';
    return verdict('offline', reason, 'Start the agent (`systemctl start gf-agent`) and check that the machine reaches the control plane, then run `gf-agent status`.', since);
  }
  if (facts.cordoned) return verdict('cordoned', 'Cordoned by the service: no new job is offered to it.', 'Contact the service\'s support; running jobs are not affected.');
  if (facts.drainRequested && facts.drainSetBy === 'admin') {
    return verdict('draining', 'Drained by the service\'s admins: it takes no new job.', 'Only an admin lifts this drain: contact the service\'s support; running jobs finish.');
  }
  if (facts.drainRequested || facts.status === 'draining') {
    return verdict('draining', 'Drained: it takes no new job.', 'Undrain it from the machine page or with `gf-agent undrain` when it should take jobs again.');
  }
  // A failed pre-offer check (driver, fabric manager, a container that lost its GPUs) names its
  // own fix in the agent's reason, and comes before the GPUs: it is the machine's, not theirs.
  const carried = facts.status === 'unhealthy' ? splitReasonFix(firstLine(facts.healthReason ?? '')) : null;
  if (carried?.fix) return verdict('unhealthy', `Unhealthy: ${carried.what}.`, `${carried.fix[0]!.toUpperCase()}${carried.fix.slice(1)}, ${DOCTOR}.`);
  // The reported status is current; the probe state comes with the last inventory the agent sent.
  if (facts.status === 'unhealthy' && (facts.probe.state === 'failed' || /^GPU container probe failed/i.test(facts.healthReason ?? ''))) {
    const output = probeMessage(facts.healthReason ?? facts.probe.output);
    return verdict('probe_failed', `GPU probe failed: ${output}.`, probeFix(output));
  }
  const failed = facts.gpus.filter((g) => g.verdict === 'failed');
  if (facts.gpus.length > 0 && failed.length === facts.gpus.length) {
    const detail = failed.map((g) => `GPU ${g.index}: ${g.reasons.join('; ') || 'failed'}`).join('; ');
    return verdict('gpu_failed', `Every GPU failed its health checks (${detail}).`, `Reset or replace the GPUs (\`nvidia-smi -r\`, or reboot), ${DOCTOR}.`);
  }
  if (facts.status === 'unhealthy') {
    if (facts.probe.state === 'not_run') return verdict('probe_failed', 'GPU probe not run yet: GPUs are offered once a container has seen them.', `Wait a minute for the probe; if it stays, ${DOCTOR}.`);
    const reason = firstLine(facts.healthReason ?? '') || 'the agent reports the machine unhealthy';
    return verdict('unhealthy', `Unhealthy: ${reason}.`, `Fix what the reason says, ${DOCTOR}.`);
  }
  if (facts.gpus.length === 0) {
    const unsupported = notOfferedText(facts);
    if (unsupported) {
      return verdict('unhealthy', `No GPU is offered: ${unsupported}.`, 'Only NVIDIA GPUs of compute capability 7.5 (Turing) or newer are offered; put such a card in this machine. `gf-agent inventory` lists each GPU with its reason.');
    }
    return verdict('unhealthy', 'No GPU of a listed class is offered.', `Check that \`nvidia-smi\` lists the GPUs, ${DOCTOR}.`);
  }
  if (facts.driverVersion !== null) {
    for (const classId of new Set(facts.gpus.map((g) => g.classId))) {
      const minimum = classMinDriver(facts, classId);
      if (minimum === null) continue;
      if (compareDriverVersions(facts.driverVersion, minimum) < 0) {
        return verdict('driver_too_old', `Driver too old: ${facts.driverVersion} is below ${minimum}, the oldest offered for ${classLabel(facts, classId)}.`, `Install NVIDIA driver ${minimum} or newer and reboot, ${DOCTOR}.`);
      }
    }
  }
  if (facts.pricePerGpuHourMicroUsd === null) return verdict('no_price', 'No price set: it is offered to no one.', 'Set a price per GPU-hour on the Prices page or the machine page.');
  if (facts.verification !== 'verified') {
    // `tier_unverified` keeps its name (older agents' `gf-agent status` knows the codes); what
    // verifies a machine is now a GPU challenge (docs/decisions.md "GPU proof").
    const why = facts.verificationReason ? firstLine(facts.verificationReason).replace(/\.$/, '') : '';
    const reason = facts.verification === 'verifying'
      ? 'Proving its GPUs: a GPU challenge is running on it.'
      : facts.verification === 'failed'
        ? `GPUs not proven: ${why || 'the GPU challenge failed'}.`
        : `GPUs not proven yet: ${why || 'it is offered once they pass a GPU challenge'}.`;
    const fix = facts.verification === 'failed'
      ? `Fix what the reason says, ${DOCTOR}; the challenge is tried again in 10 minutes or when the agent restarts.`
      : 'Keep the agent running: the GPU challenge runs by itself within minutes and the machine is offered once it passes.';
    return verdict('tier_unverified', reason, fix);
  }
  const price = facts.pricePerGpuHourMicroUsd;
  const classes = [...new Set(facts.gpus.filter((g) => g.verdict !== 'failed').map((g) => g.classId))];
  const going = classes.map((classId) => {
    const median = facts.goingPrices?.find((p) => p.classId === classId)?.medianPerGpuHourMicroUsd ?? null;
    return { classId, median };
  });
  const goingText = going.map(({ classId, median }) => `going price for ${classLabel(facts, classId)} is ${median === null ? 'not known yet' : `${usd(median)}/GPU-h`}`).join('; ');
  const unsupported = notOfferedText(facts);
  const withdrawn = (failed.length > 0 ? ` GPU ${failed.map((g) => g.index).join(', ')} withdrawn (failed health checks).` : '') + (unsupported ? ` Not offered: ${unsupported}.` : '');
  const above = going.some(({ median }) => median !== null && price > median);
  return verdict(
    'offered',
    `Offered at ${usd(price)}/GPU-h; ${goingText}.${withdrawn}`,
    above ? 'Lower the price toward the going price to be rented sooner.' : null,
  );
}

/**
 * The verdict as one line, the parts the pages show in the same order: "earning: …" or
 * "not earning: …", since when, and the fix. `gf-agent status` prints it.
 */
export function earningLine(v: EarningVerdict): string {
  return `${v.earning ? 'earning' : 'not earning'}: ${v.reason}${v.since ? ` (since ${v.since})` : ''}${v.fix ? ` Fix: ${v.fix}` : ''}`;
}
