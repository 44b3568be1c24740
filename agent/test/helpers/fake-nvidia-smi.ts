import { execFile } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseNvidiaSmiList, type GpuProbe } from '../../src/inventory/gpu-probe.js';
import { parseNvidiaSmiXml } from '../../src/inventory/nvidia-smi-xml.js';

/** The recorded `nvidia-smi -q -x` outputs in `agent/test/fixtures/nvidia-smi/`. */
export const FIXTURES = [
  'h100-80gb-hbm3',
  'h100-80gb-hbm3-driver-550',
  'a100-sxm4-40gb',
  'rtx-4090',
  'l4',
  '8x-a100-sxm4-80gb',
  'h100-80gb-hbm3-ecc-dbe',
  'h100-80gb-hbm3-remap-failure',
  'h100-80gb-hbm3-pcie-x8',
  'a100-sxm4-40gb-thermal',
  '8x-a100-sxm4-80gb-gpu0-lost',
] as const;
export type Fixture = (typeof FIXTURES)[number];

/** nvidia-smi's exit status for a fixture when not 0: 15 when a GPU is lost (and the others still printed). */
export const FIXTURE_EXIT_CODES: Partial<Record<Fixture, number>> = { '8x-a100-sxm4-80gb-gpu0-lost': 15 };

export const fixturePath = (name: Fixture) => fileURLToPath(new URL(`../fixtures/nvidia-smi/${name}.xml`, import.meta.url));

/** The recorded kernel logs in `agent/test/fixtures/kernel-log/`. */
export const kernelLogFixturePath = (name: '8x-a100-xid-79.dmesg' | 'h100-xid-48.kmsg') => fileURLToPath(new URL(`../fixtures/kernel-log/${name}.txt`, import.meta.url));

export interface FakeNvidiaSmi {
  /** A directory holding the fake `nvidia-smi`; put it first on PATH. */
  binDir: string;
  /** `PATH` with the fake first. */
  path: string;
  /** Serve another fixture from the next call on. */
  use(name: Fixture): void;
  /** Make the next calls fail as nvidia-smi does when the driver is gone. */
  breakDriver(): void;
  /**
   * The GPU probe for these fake GPUs: what a container would list is the fake's `nvidia-smi -L`
   * (no container runtime can see GPUs that do not exist).
   */
  probe: GpuProbe;
  cleanup(): void;
}

/**
 * A fake `nvidia-smi` executable (a shell script) that prints the current fixture for
 * `-q -x`, the only GPU fake the tests use. Switching fixtures is a file copy, so a running
 * agent sees a driver, count or model change on its next read.
 */
export function fakeNvidiaSmi(initial: Fixture): FakeNvidiaSmi {
  const binDir = mkdtempSync(join(tmpdir(), 'gf-fake-smi-'));
  const current = join(binDir, 'current.xml');
  const exitCode = join(binDir, 'current.exit');
  const list = join(binDir, 'current.list');
  const script = join(binDir, 'nvidia-smi');
  writeFileSync(
    script,
    `#!/bin/sh
# fake nvidia-smi for gpufarm agent tests
if [ ! -f "${current}" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
  exit 9
fi
case "$*" in
  *-x*) cat "${current}"; exit "$(cat "${exitCode}" 2>/dev/null || echo 0)" ;;
  -L) cat "${list}" ;;
  *) echo "fake nvidia-smi: only -q -x is recorded" >&2; exit 2 ;;
esac
`,
  );
  chmodSync(script, 0o755);
  const use = (name: Fixture) => {
    copyFileSync(fixturePath(name), `${current}.tmp`);
    // rename is atomic: a read in progress sees the old or the new fixture, never half of one
    renameSync(`${current}.tmp`, current);
    writeFileSync(exitCode, String(FIXTURE_EXIT_CODES[name] ?? 0));
    // `-L` lists what the fixture lists, as the driver would.
    const { gpus } = parseNvidiaSmiXml(readFileSync(fixturePath(name), 'utf8'));
    writeFileSync(list, gpus.map((g) => `GPU ${g.index}: ${g.name} (UUID: ${g.uuid})\n`).join(''));
  };
  use(initial);
  return {
    binDir,
    path: `${binDir}${delimiter}${process.env.PATH ?? ''}`,
    use,
    breakDriver: () => rmSync(current, { force: true }),
    probe: {
      probe: (uuids) =>
        new Promise((resolve) => {
          execFile(script, ['-L'], { encoding: 'utf8' }, (err, stdout) => {
            if (err) return resolve({ ok: false, reason: `nvidia-smi -L failed: ${err.message}` });
            const listed = parseNvidiaSmiList(stdout);
            const missing = uuids.filter((u) => !listed.some((l) => l.uuid === u));
            resolve(missing.length > 0 ? { ok: false, reason: `missing ${missing.join(', ')}` } : { ok: true, listed });
          });
        }),
    },
    cleanup: () => rmSync(binDir, { recursive: true, force: true }),
  };
}
