import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What systemd says of a unit (`systemctl is-active`), or why it cannot be asked. */
export type UnitState = { kind: 'state'; state: string } | { kind: 'no_systemd'; detail: string };

/** Facts of the NVIDIA driver on the host that `nvidia-smi` does not give, for the pre-offer checks. */
export interface DriverHostFacts {
  /** The loaded kernel module's version (`/proc/driver/nvidia/version`); null when none is loaded or it cannot be read. */
  kernelModuleVersion: string | null;
  /** Versions of the NVML libraries installed (`libnvidia-ml.so.<version>` in the library folders), sorted. */
  nvmlLibraryVersions: string[];
  /** NVSwitches the kernel's nvidia-nvswitch driver lists (`/proc/driver/nvidia-nvswitch/devices/`); 0 without. */
  nvswitchCount: number;
  /** The fabric manager's systemd state; null when it was not asked (not an NVSwitch system). */
  fabricManager: UnitState | null;
}

/** The driver-host port: read once per inventory refresh (files, and one `systemctl` on NVSwitch systems). */
export interface DriverHostReader {
  /** `fabricAttached`: nvidia-smi reported an NVSwitch fabric on a GPU, so the fabric manager's state matters. */
  read(options: { fabricAttached: boolean }): Promise<DriverHostFacts>;
}

/** The fabric manager's systemd unit (NVIDIA's packages: `nvidia-fabricmanager-<branch>`). */
export const FABRIC_MANAGER_UNIT = 'nvidia-fabricmanager.service';

/** Where distributions put the NVIDIA user-space libraries (under the host root). */
const LIBRARY_DIRS = ['usr/lib/x86_64-linux-gnu', 'usr/lib/aarch64-linux-gnu', 'usr/lib64', 'usr/lib'];

/**
 * The kernel module's version from `/proc/driver/nvidia/version`:
 * `NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 …` or, for the open
 * modules, `NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build …`.
 */
export function parseKernelModuleVersion(text: string): string | null {
  return /^NVRM version:.*?Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)\s/m.exec(text)?.[1] ?? null;
}

/** The versions of `libnvidia-ml.so.<version>` file names (`libnvidia-ml.so.550.54.15`); the `.so.1` link is not a version. */
export function nvmlLibraryVersionsIn(names: readonly string[]): string[] {
  const versions = names.map((n) => /^libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$/.exec(n)?.[1]).filter((v): v is string => v !== undefined);
  return [...new Set(versions)].sort();
}

/**
 * Whether a library version as NVML prints it (`570.124`, major and minor only) or in full
 * (`570.124.06`) is the module's version: equal in every part the shorter one has.
 */
export function sameDriverVersion(a: string, b: string): boolean {
  const pa = a.split('.');
  const pb = b.split('.');
  const n = Math.min(pa.length, pb.length);
  return pa.slice(0, n).every((part, i) => Number(part) === Number(pb[i]));
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

function list(path: string): string[] {
  try {
    return readdirSync(path);
  } catch {
    return [];
  }
}

/** `systemctl is-active UNIT`: its one word on stdout (`active`, `inactive`, `failed`, `activating`…). */
function unitState(systemctl: string, unit: string, hostRoot: string): Promise<UnitState> {
  // sd_booted(): systemd is the init system when this directory exists; elsewhere (a container,
  // another init) systemctl has no manager to ask and the fabric state alone decides.
  if (!existsSync(join(hostRoot, 'run/systemd/system'))) return Promise.resolve({ kind: 'no_systemd', detail: 'systemd is not the init system' });
  return new Promise((resolve) => {
    execFile(systemctl, ['is-active', unit], { timeout: 10_000, encoding: 'utf8' }, (err, stdout, stderr) => {
      if ((err as NodeJS.ErrnoException | null)?.code === 'ENOENT') return resolve({ kind: 'no_systemd', detail: `${systemctl} was not found` });
      const word = stdout.trim().split('\n')[0]?.trim() ?? '';
      if (/^[a-z-]{2,32}$/.test(word)) return resolve({ kind: 'state', state: word });
      resolve({ kind: 'no_systemd', detail: `${systemctl} is-active ${unit} said: ${`${stdout} ${stderr}`.trim().slice(0, 200) || (err?.message ?? 'nothing')}` });
    });
  });
}

export interface SystemDriverHostOptions {
  /** Where the host's `/proc`, `/run` and library folders are (`/`, or `/host` in a container). */
  hostRoot: string;
  /** The systemctl executable; looked up on PATH. */
  systemctl?: string;
}

/** The driver-host facts from the host's files and `systemctl`. */
export function systemDriverHost(options: SystemDriverHostOptions): DriverHostReader {
  const root = options.hostRoot;
  const systemctl = options.systemctl ?? 'systemctl';
  return {
    async read({ fabricAttached }) {
      const version = readText(join(root, 'proc/driver/nvidia/version'));
      const nvswitchCount = list(join(root, 'proc/driver/nvidia-nvswitch/devices')).length;
      return {
        kernelModuleVersion: version === null ? null : parseKernelModuleVersion(version),
        nvmlLibraryVersions: nvmlLibraryVersionsIn(LIBRARY_DIRS.flatMap((d) => list(join(root, d)))),
        nvswitchCount,
        fabricManager: fabricAttached || nvswitchCount > 0 ? await unitState(systemctl, FABRIC_MANAGER_UNIT, root) : null,
      };
    },
  };
}
