/**
 * Pre-offer checks: what must hold on a GPU machine before its GPUs are offered, beyond the GPUs
 * themselves (`gpu-health.ts`). The agent runs them (`agent/src/inventory/pre-offer.ts`, `gf-agent
 * doctor`); a failed one makes the machine unhealthy with a reason that carries its fix
 * (`reasonWithFix`), which the operator's earning verdict splits into its reason and fix
 * (`earning.ts`). The per-GPU parts (persistence mode, the NVSwitch fabric) travel in the GPU
 * health reports too, so the control plane judges them itself. The words are here, once, for
 * every side that prints them.
 */

/**
 * The GPU probe, the first check: a container started with the NVIDIA runtime ran `nvidia-smi -L`
 * and saw the GPUs. The agent reports its state in the machine's health.
 */
export const GPU_PROBE_STATES = ['passed', 'failed', 'not_run', 'simulated', 'no_gpus'] as const;

/** What separates a machine health reason from its fix (`reasonWithFix`). */
const FIX_SEPARATOR = '; fix: ';

/**
 * A machine health reason with what the operator does about it: `<what>; fix: <fix>`. `what`
 * and `fix` are sentences without their final period; backticks mark commands (the pages show
 * them as code).
 */
export function reasonWithFix(what: string, fix: string): string {
  return `${what}${FIX_SEPARATOR}${fix}`;
}

/** A reason made by `reasonWithFix` split again; `fix` is null for a reason that carries none. */
export function splitReasonFix(reason: string): { what: string; fix: string | null } {
  const at = reason.indexOf(FIX_SEPARATOR);
  if (at < 0) return { what: reason, fix: null };
  return { what: reason.slice(0, at), fix: reason.slice(at + FIX_SEPARATOR.length) };
}

/** The fix of a driver whose kernel module and user-space libraries differ (a driver upgrade without a reboot). */
export const DRIVER_MISMATCH_FIX = 'reboot, or reload the nvidia kernel modules (stop the GPU processes and nvidia-persistenced, then `rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia`)';

/** The fix of persistence mode off. */
export const PERSISTENCE_MODE_FIX = 'enable persistence mode: `nvidia-smi -pm 1` (until the next reboot) or `systemctl enable --now nvidia-persistenced`';

/** The fix of an NVSwitch system whose fabric manager is not running or has not set the fabric up. */
export const FABRIC_MANAGER_FIX = 'install and start the fabric manager of the driver\'s exact version: `systemctl enable --now nvidia-fabricmanager` (on HGX B200 and newer also `nvlsm`), then check that `nvidia-smi -q` shows Fabric State Completed, Status Success';

/** The fix of a job container that lost its GPUs (NVIDIA Container Toolkit: "Failed to initialize NVML: Unknown Error"). */
export const CONTAINER_GPU_LOSS_FIX = 'run `nvidia-ctk system create-dev-char-symlinks --create-all` and install its udev rule, or set Docker\'s `"exec-opts": ["native.cgroupdriver=cgroupfs"]`, so that a Docker restart or `systemctl daemon-reload` no longer takes the GPUs from running containers (NVIDIA Container Toolkit troubleshooting)';

/** A GPU's NVSwitch fabric as `nvidia-smi -q -x` prints it (`<fabric><state>`, `<status>`), null where it has none. */
export interface FabricInfo {
  /** `Not Started`, `In Progress`, `Completed`; null for `N/A` or `Not Supported`: no NVSwitch fabric. */
  state: string | null;
  /** `Success` once the registration completed, else the error (`Insufficient Resources`); null for `N/A` (not completed yet). */
  status: string | null;
}

/**
 * Why a GPU's NVSwitch fabric is not ready, or null when it is ready or the GPU has no fabric
 * (state `N/A`): ready is state `Completed` with status `Success` (NVML: the status counts only
 * once the state is complete).
 */
export function fabricProblem(fabric: FabricInfo | null | undefined): string | null {
  if (!fabric || fabric.state === null) return null;
  if (/^completed$/i.test(fabric.state) && /^success$/i.test(fabric.status ?? '')) return null;
  return `the NVSwitch fabric is not ready (state ${fabric.state}, status ${fabric.status ?? 'N/A'}): CUDA fails with "system not yet initialized" until the fabric manager has set it up`;
}

/** Why persistence mode off matters, for the GPU's warning and doctor. */
export const PERSISTENCE_MODE_OFF = 'persistence mode is off: the driver is torn down and set up again around each job, which slows job starts and can fail their first GPU call';
