import type { MachineHealth, MachineInventory } from '@gpufarm/shared';

/**
 * What a farm claims about its machine (pure rules): the GPUs and driver of its hello are kept as
 * reported, but they are offered only once a GPU challenge the control plane scheduled has passed
 * on that exact set (`fingerprint`), and never while the GPU probe's `nvidia-smi -L` disagrees
 * with them (`probeMismatch`).
 */

/** The claims a verification covers: a change of any of them needs a new challenge. */
export interface ClaimFingerprint {
  simulated: boolean;
  driverVersion: string | null;
  /** By UUID: product name, catalog class, VRAM bytes. */
  gpus: Array<{ uuid: string; name: string; classId: string | null; vramBytes: number }>;
}

/** The fingerprint of an inventory's offered GPUs, in UUID order so equal sets compare equal. */
export function claimFingerprint(inventory: MachineInventory): ClaimFingerprint {
  return {
    simulated: inventory.simulated,
    driverVersion: inventory.driverVersion,
    gpus: inventory.gpus
      .map((g) => ({ uuid: g.uuid, name: g.name, classId: g.classId, vramBytes: g.vramBytes }))
      .sort((a, b) => (a.uuid < b.uuid ? -1 : a.uuid > b.uuid ? 1 : 0)),
  };
}

/**
 * What changed between the verified claims and the current ones, as an operator reads it, or
 * null when nothing did. A machine whose GPUs are not listed right now (unhealthy) has nothing
 * to compare: its verification stands until GPUs come back.
 */
export function claimChange(verified: ClaimFingerprint, current: ClaimFingerprint): string | null {
  if (current.gpus.length === 0) return null;
  const changes: string[] = [];
  if (verified.simulated !== current.simulated) changes.push(current.simulated ? 'now simulated' : 'no longer simulated');
  if (verified.driverVersion !== current.driverVersion) changes.push(`driver ${verified.driverVersion ?? 'none'} -> ${current.driverVersion ?? 'none'}`);
  const before = new Map(verified.gpus.map((g) => [g.uuid, g]));
  const after = new Map(current.gpus.map((g) => [g.uuid, g]));
  const added = current.gpus.filter((g) => !before.has(g.uuid)).map((g) => `${g.name} ${g.uuid}`);
  const removed = verified.gpus.filter((g) => !after.has(g.uuid)).map((g) => `${g.name} ${g.uuid}`);
  const altered = current.gpus.filter((g) => {
    const had = before.get(g.uuid);
    return had !== undefined && (had.name !== g.name || had.classId !== g.classId || had.vramBytes !== g.vramBytes);
  });
  if (added.length > 0) changes.push(`GPU added: ${added.join(', ')}`);
  if (removed.length > 0) changes.push(`GPU removed: ${removed.join(', ')}`);
  if (altered.length > 0) changes.push(`GPU changed: ${altered.map((g) => g.uuid).join(', ')}`);
  return changes.length > 0 ? changes.join('; ').slice(0, 1000) : null;
}

/**
 * Why the probe's listing contradicts the GPUs the machine claims, or null when it agrees (or
 * there is nothing to compare: simulated, unhealthy, or an agent that sends no listing). The
 * listing must name exactly the claimed UUIDs, each with the claimed product name.
 */
export function probeMismatch(gpus: MachineInventory['gpus'], health: MachineHealth, simulated: boolean): string | null {
  const listing = health.probeListing;
  if (simulated || health.status !== 'healthy' || listing === null || listing === undefined) return null;
  const listed = new Map(listing.map((g) => [g.uuid, g.name]));
  const claimed = new Set(gpus.map((g) => g.uuid));
  const problems: string[] = [];
  for (const g of gpus) {
    const name = listed.get(g.uuid);
    if (name === undefined) problems.push(`${g.uuid} (${g.name}) is not listed`);
    else if (name !== g.name) problems.push(`${g.uuid} is listed as ${name}, claimed as ${g.name}`);
  }
  for (const g of listing) if (!claimed.has(g.uuid)) problems.push(`${g.uuid} (${g.name}) is listed but not claimed`);
  if (problems.length === 0) return null;
  return `the GPU probe's nvidia-smi -L disagrees with the GPUs the agent reports: ${problems.join('; ')}`.slice(0, 2000);
}

/** The setting that lets a deployment offer simulated machines; every refusal names it. */
export const SIMULATED_MACHINES_SETTING = 'GF_ALLOW_SIMULATED_MACHINES';

/**
 * Why a machine in simulated mode is not taken here, or null when it is (a real machine, or a
 * deployment that allows simulated ones): nothing proves a simulated machine has GPUs, so it is
 * never offered where customers pay (live keys), and elsewhere only when the setting says so.
 */
export function simulatedRefusal(simulated: boolean, allowSimulated: boolean): string | null {
  if (!simulated || allowSimulated) return null;
  return `this deployment does not offer simulated machines (${SIMULATED_MACHINES_SETTING} is off): run the agent without simulated mode on a machine with NVIDIA GPUs`;
}

/**
 * Why the probe cannot back the machine's claims, or null when it can: a machine with real
 * GPUs is verified only with a passed probe that listed them (a simulated one has no probe:
 * `simulatedRefusal` decides whether it is taken at all).
 */
export function probeEvidenceMissing(inventory: MachineInventory): string | null {
  if (inventory.simulated) return null;
  if (inventory.health.gpuProbe !== 'passed') return `the GPU probe has not passed (${inventory.health.gpuProbe})`;
  if (!inventory.health.probeListing) return 'the agent did not report the GPU probe\'s nvidia-smi -L listing; upgrade the agent';
  return probeMismatch(inventory.gpus, inventory.health, false);
}
