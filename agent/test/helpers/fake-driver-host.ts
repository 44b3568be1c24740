import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The recorded `/proc/driver/nvidia/version` files in `agent/test/fixtures/driver-host/`. */
export type ProcVersionFixture = 'proc-driver-nvidia-version-570.86.15-open' | 'proc-driver-nvidia-version-535.129.03';

export interface FakeHostRootOptions {
  /** The loaded kernel module's `/proc/driver/nvidia/version`; none: no module loaded. */
  procVersion?: ProcVersionFixture;
  /** Versions of `libnvidia-ml.so.<version>` put in `usr/lib/x86_64-linux-gnu` (empty files, with the `.so.1` link name beside). */
  nvmlLibraries?: string[];
  /** PCI addresses the kernel's nvidia-nvswitch driver lists (`proc/driver/nvidia-nvswitch/devices/<address>`). */
  nvswitches?: string[];
  /** systemd is the init system (`run/systemd/system` exists). */
  systemd?: boolean;
}

/**
 * A host root for the agent's `host_root` setting: the driver's files as a machine has them, so
 * the pre-offer checks read a driver this machine does not have. The GPU stays the only fake:
 * these are the files the driver would have written.
 */
export function fakeHostRoot(o: FakeHostRootOptions): { root: string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), 'gf-host-root-'));
  if (o.procVersion) {
    mkdirSync(join(root, 'proc/driver/nvidia'), { recursive: true });
    copyFileSync(fileURLToPath(new URL(`../fixtures/driver-host/${o.procVersion}.txt`, import.meta.url)), join(root, 'proc/driver/nvidia/version'));
  }
  const libs = join(root, 'usr/lib/x86_64-linux-gnu');
  mkdirSync(libs, { recursive: true });
  for (const v of o.nvmlLibraries ?? []) writeFileSync(join(libs, `libnvidia-ml.so.${v}`), '');
  if ((o.nvmlLibraries ?? []).length > 0) writeFileSync(join(libs, 'libnvidia-ml.so.1'), '');
  for (const address of o.nvswitches ?? []) mkdirSync(join(root, 'proc/driver/nvidia-nvswitch/devices', address), { recursive: true });
  if (o.systemd) mkdirSync(join(root, 'run/systemd/system'), { recursive: true });
  return { root, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

export interface FakeSystemctl {
  binDir: string;
  /** `PATH` with the fake first (after `before`'s folders, such as the fake nvidia-smi's). */
  path: (before?: string) => string;
  /** What `is-active UNIT` answers from the next call on. */
  set(unit: string, state: string): void;
  cleanup(): void;
}

/**
 * A fake `systemctl` (a shell script) answering `is-active UNIT` as systemd does: the unit's
 * state on stdout, exit 0 for `active`, 3 for anything else (a unit it does not know is
 * `inactive`).
 */
export function fakeSystemctl(states: Record<string, string>): FakeSystemctl {
  const binDir = mkdtempSync(join(tmpdir(), 'gf-fake-systemctl-'));
  const stateDir = join(binDir, 'units');
  mkdirSync(stateDir);
  const set = (unit: string, state: string) => writeFileSync(join(stateDir, unit), `${state}\n`);
  for (const [unit, state] of Object.entries(states)) set(unit, state);
  const script = join(binDir, 'systemctl');
  writeFileSync(
    script,
    `#!/bin/sh
# fake systemctl for gpufarm agent tests: only is-active
[ "$1" = "is-active" ] || { echo "fake systemctl: only is-active" >&2; exit 1; }
if [ -f "${stateDir}/$2" ]; then state="$(cat "${stateDir}/$2")"; else state=inactive; fi
echo "$state"
[ "$state" = active ] && exit 0
exit 3
`,
  );
  chmodSync(script, 0o755);
  return {
    binDir,
    path: (before) => [before, binDir, process.env.PATH ?? ''].filter(Boolean).join(delimiter),
    set,
    cleanup: () => rmSync(binDir, { recursive: true, force: true }),
  };
}
