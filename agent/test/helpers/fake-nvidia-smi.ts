import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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
  't4',
  'rtx-3060',
  'rtx-4000-sff-ada',
  'rtx-5090',
  'b200-graphics-device-driver-570.86',
  'rtx-a2000-12gb',
  'gtx-1080-ti',
  '8x-h100-sxm5',
  '8x-h100-sxm5-fabric-in-progress',
] as const;
export type Fixture = (typeof FIXTURES)[number];

/** nvidia-smi's exit status for a fixture when not 0: 15 when a GPU is lost (and the others still printed). */
export const FIXTURE_EXIT_CODES: Partial<Record<Fixture, number>> = { '8x-a100-sxm4-80gb-gpu0-lost': 15 };

/**
 * What `nvidia-smi --query-gpu=pci.bus_id,compute_cap --format=csv,noheader` answers for each
 * fixture's GPUs, as the driver of that fixture would: driver 470 has no `compute_cap` field
 * (null: the fake answers as such a driver does), drivers from 510 on give each GPU's.
 */
export const FIXTURE_COMPUTE_CAPS: Record<Fixture, string | null> = {
  'h100-80gb-hbm3': '9.0',
  'h100-80gb-hbm3-driver-550': '9.0',
  'a100-sxm4-40gb': null,
  'rtx-4090': '8.9',
  l4: '8.9',
  '8x-a100-sxm4-80gb': '8.0',
  'h100-80gb-hbm3-ecc-dbe': '9.0',
  'h100-80gb-hbm3-remap-failure': '9.0',
  'h100-80gb-hbm3-pcie-x8': '9.0',
  'a100-sxm4-40gb-thermal': null,
  '8x-a100-sxm4-80gb-gpu0-lost': '8.0',
  t4: '7.5',
  'rtx-3060': '8.6',
  'rtx-4000-sff-ada': '8.9',
  'rtx-5090': '12.0',
  'b200-graphics-device-driver-570.86': '10.0',
  'rtx-a2000-12gb': '8.6',
  'gtx-1080-ti': '6.1',
  '8x-h100-sxm5': '9.0',
  '8x-h100-sxm5-fabric-in-progress': '9.0',
};

/** Recorded outputs of nvidia-smi when it fails (`../fixtures/nvidia-smi/<name>.txt`), with its exit status. */
export const FAILURE_FIXTURES = {
  // A driver upgraded (libraries 570.124.06) without a reboot (kernel module 570.86.15 still loaded): NVML_ERROR_LIB_RM_VERSION_MISMATCH.
  'driver-library-mismatch-570': 18,
} as const;
export type FailureFixture = keyof typeof FAILURE_FIXTURES;

/** What an older driver prints for `--query-gpu=compute_cap` (and exits 2). */
const NO_COMPUTE_CAP_FIELD = 'Field "compute_cap" is not a valid field to query.';

/** One GPU of a machine made from a fixture's GPU element (`machineXml`). */
export interface FakeCard {
  name: string;
  memoryMiB: number;
  /** `pci_device_id` as the driver prints it, such as `0x2B8510DE`. */
  pciDeviceId: string;
  /** What `--query-gpu=compute_cap` answers for it; null: the field is unknown to the driver. */
  computeCap: string | null;
  /** Its `product_architecture` (`Ampere`, `Ada Lovelace`); the template's when left out. */
  architecture?: string;
}

const card = (name: string, memoryMiB: number, pciDeviceId: string, computeCap: string, architecture: string): FakeCard => ({ name, memoryMiB, pciDeviceId, computeCap, architecture });

/**
 * A card of each curated class as its driver reports it: product name, memory total (a little
 * below the size it is sold with; 1/16 below on GDDR cards with ECC on), PCI device id (from the
 * PCI ID database), compute capability and `product_architecture`. Keyed by the class the card
 * must be offered as; a class without a card here fails `test/gpu-catalog.test.ts`.
 */
export const CURATED_CARDS: Readonly<Record<string, FakeCard>> = {
  't4-16gb': card('Tesla T4', 15360, '0x1EB810DE', '7.5', 'Turing'),
  'gtx-1660-ti-6gb': card('NVIDIA GeForce GTX 1660 Ti', 6144, '0x218210DE', '7.5', 'Turing'),
  'rtx-2080-ti-11gb': card('NVIDIA GeForce RTX 2080 Ti', 11264, '0x1E0710DE', '7.5', 'Turing'),
  'titan-rtx-24gb': card('NVIDIA TITAN RTX', 24576, '0x1E0210DE', '7.5', 'Turing'),
  'quadro-rtx-6000-24gb': card('Quadro RTX 6000', 24576, '0x1E3010DE', '7.5', 'Turing'),
  'quadro-rtx-8000-48gb': card('Quadro RTX 8000', 49152, '0x1E3010DE', '7.5', 'Turing'),
  'a100-80gb': card('NVIDIA A100-SXM4-80GB', 81920, '0x20B210DE', '8.0', 'Ampere'),
  'a100-40gb': card('NVIDIA A100-SXM4-40GB', 40960, '0x20B010DE', '8.0', 'Ampere'),
  'a30-24gb': card('NVIDIA A30', 24576, '0x20B710DE', '8.0', 'Ampere'),
  'a40-48gb': card('NVIDIA A40', 46068, '0x223510DE', '8.6', 'Ampere'),
  'a10-24gb': card('NVIDIA A10', 23028, '0x223610DE', '8.6', 'Ampere'),
  'rtx-a6000-48gb': card('NVIDIA RTX A6000', 49140, '0x223010DE', '8.6', 'Ampere'),
  'rtx-a5000-24gb': card('NVIDIA RTX A5000', 24564, '0x223110DE', '8.6', 'Ampere'),
  'rtx-a4000-16gb': card('NVIDIA RTX A4000', 16376, '0x24B010DE', '8.6', 'Ampere'),
  'rtx-3090-ti-24gb': card('NVIDIA GeForce RTX 3090 Ti', 24564, '0x220310DE', '8.6', 'Ampere'),
  'rtx-3090-24gb': card('NVIDIA GeForce RTX 3090', 24576, '0x220410DE', '8.6', 'Ampere'),
  'rtx-3080-ti-12gb': card('NVIDIA GeForce RTX 3080 Ti', 12288, '0x220810DE', '8.6', 'Ampere'),
  'rtx-3080-10gb': card('NVIDIA GeForce RTX 3080', 10240, '0x220610DE', '8.6', 'Ampere'),
  'rtx-3070-8gb': card('NVIDIA GeForce RTX 3070', 8192, '0x248410DE', '8.6', 'Ampere'),
  'rtx-3060-ti-8gb': card('NVIDIA GeForce RTX 3060 Ti', 8192, '0x248610DE', '8.6', 'Ampere'),
  'rtx-3060-12gb': card('NVIDIA GeForce RTX 3060', 12288, '0x250410DE', '8.6', 'Ampere'),
  'l40s-48gb': card('NVIDIA L40S', 46068, '0x26B910DE', '8.9', 'Ada Lovelace'),
  'l40-48gb': card('NVIDIA L40', 46068, '0x26B510DE', '8.9', 'Ada Lovelace'),
  'l4-24gb': card('NVIDIA L4', 23034, '0x27B810DE', '8.9', 'Ada Lovelace'),
  'rtx-6000-ada-48gb': card('NVIDIA RTX 6000 Ada Generation', 49140, '0x26B110DE', '8.9', 'Ada Lovelace'),
  'rtx-5000-ada-32gb': card('NVIDIA RTX 5000 Ada Generation', 32760, '0x26B210DE', '8.9', 'Ada Lovelace'),
  'rtx-4000-ada-20gb': card('NVIDIA RTX 4000 Ada Generation', 20475, '0x27B210DE', '8.9', 'Ada Lovelace'),
  'rtx-4000-sff-ada-20gb': card('NVIDIA RTX 4000 SFF Ada Generation', 20475, '0x27B010DE', '8.9', 'Ada Lovelace'),
  'rtx-4090-24gb': card('NVIDIA GeForce RTX 4090', 24564, '0x268410DE', '8.9', 'Ada Lovelace'),
  'rtx-4080-super-16gb': card('NVIDIA GeForce RTX 4080 SUPER', 16376, '0x270210DE', '8.9', 'Ada Lovelace'),
  'rtx-4080-16gb': card('NVIDIA GeForce RTX 4080', 16376, '0x270410DE', '8.9', 'Ada Lovelace'),
  'rtx-4070-ti-super-16gb': card('NVIDIA GeForce RTX 4070 Ti SUPER', 16376, '0x270510DE', '8.9', 'Ada Lovelace'),
  'rtx-4070-ti-12gb': card('NVIDIA GeForce RTX 4070 Ti', 12282, '0x278210DE', '8.9', 'Ada Lovelace'),
  'rtx-4070-super-12gb': card('NVIDIA GeForce RTX 4070 SUPER', 12282, '0x278310DE', '8.9', 'Ada Lovelace'),
  'rtx-4070-12gb': card('NVIDIA GeForce RTX 4070', 12282, '0x278610DE', '8.9', 'Ada Lovelace'),
  'rtx-4060-ti-16gb': card('NVIDIA GeForce RTX 4060 Ti', 16380, '0x280510DE', '8.9', 'Ada Lovelace'),
  'h100-80gb-sxm': card('NVIDIA H100 80GB HBM3', 81559, '0x233010DE', '9.0', 'Hopper'),
  'h100-80gb-pcie': card('NVIDIA H100 PCIe', 81559, '0x233110DE', '9.0', 'Hopper'),
  'h100-nvl-94gb': card('NVIDIA H100 NVL', 95830, '0x232110DE', '9.0', 'Hopper'),
  'h200-141gb': card('NVIDIA H200', 143771, '0x233510DE', '9.0', 'Hopper'),
  'b200-180gb': card('NVIDIA B200', 183359, '0x290110DE', '10.0', 'Blackwell'),
  'rtx-pro-6000-blackwell-96gb': card('NVIDIA RTX PRO 6000 Blackwell Server Edition', 97887, '0x2BB510DE', '12.0', 'Blackwell'),
  'rtx-5090-32gb': card('NVIDIA GeForce RTX 5090', 32607, '0x2B8510DE', '12.0', 'Blackwell'),
  'rtx-5080-16gb': card('NVIDIA GeForce RTX 5080', 16303, '0x2C0210DE', '12.0', 'Blackwell'),
  'rtx-5070-ti-16gb': card('NVIDIA GeForce RTX 5070 Ti', 16303, '0x2C0510DE', '12.0', 'Blackwell'),
};

/**
 * The XML of a machine holding `cards`, each a copy of `template`'s (single) GPU element with
 * the card's product name, memory, PCI device id and architecture, and a bus id, UUID and minor
 * number of its own; the rest (driver, element layout, live figures) is the template's. For a machine with
 * GPUs of many models: one per class of a generation, say.
 */
export function machineXml(template: Fixture, cards: readonly FakeCard[]): string {
  const xml = readFileSync(fixturePath(template), 'utf8');
  const start = xml.indexOf('\t<gpu id=');
  const end = xml.indexOf('</gpu>', start) + '</gpu>'.length;
  const gpu = xml.slice(start, end);
  const set = (text: string, tag: string, value: string) => text.replace(new RegExp(`<${tag}>[^<]*</${tag}>`), `<${tag}>${value}</${tag}>`);
  const copies = cards.map((card, i) => {
    const bus = (0x10 + i).toString(16).toUpperCase().padStart(2, '0');
    const busId = `00000000:${bus}:00.0`;
    let g = gpu.replace(/<gpu id="[^"]*">/, `<gpu id="${busId}">`);
    g = set(g, 'product_name', card.name);
    if (card.architecture) g = set(g, 'product_architecture', card.architecture);
    g = set(g, 'uuid', `GPU-f0000000-0000-4000-8000-${(i + 1).toString(16).padStart(12, '0')}`);
    g = set(g, 'minor_number', String(i));
    g = set(g, 'pci_bus', bus);
    g = set(g, 'pci_device_id', card.pciDeviceId);
    g = set(g, 'pci_bus_id', busId);
    const fb = /<fb_memory_usage>[\s\S]*?<\/fb_memory_usage>/.exec(g)![0];
    const used = Number(/<used>(\d+) MiB<\/used>/.exec(fb)?.[1] ?? 0);
    g = g.replace(fb, set(set(fb, 'total', `${card.memoryMiB} MiB`), 'free', `${Math.max(0, card.memoryMiB - used)} MiB`));
    return g;
  });
  return set(xml.slice(0, start), 'attached_gpus', String(cards.length)) + copies.join('\n') + xml.slice(end);
}

/** The `--query-gpu=pci.bus_id,compute_cap` answer for XML the fake serves; null: the driver has no such field. */
function computeCapAnswer(xml: string, caps: ReadonlyArray<string | null> | string | null): string | null {
  const buses = [...xml.matchAll(/<pci_bus_id>([^<]+)<\/pci_bus_id>/g)].map((m) => m[1]!);
  const each = (i: number) => (typeof caps === 'string' || caps === null ? caps : (caps[i] ?? null));
  if (buses.some((_, i) => each(i) === null)) return null;
  return buses.map((bus, i) => `${bus}, ${each(i)}\n`).join('');
}

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
  /** Serve this XML (`machineXml`) from the next call on, with each GPU's compute capability (null: a driver without the field). */
  useXml(xml: string, computeCaps: ReadonlyArray<string | null> | null): void;
  /** Make the next calls fail as nvidia-smi does when the driver is gone. */
  breakDriver(): void;
  /** Make the next calls print a recorded failure and exit with its status (a driver/library mismatch); `use` ends it. */
  fail(name: FailureFixture): void;
  /**
   * The GPU probe for these fake GPUs: what a container would list is the fake's `nvidia-smi -L`
   * (no container runtime can see GPUs that do not exist).
   */
  probe: GpuProbe;
  cleanup(): void;
}

/**
 * A fake `nvidia-smi` executable (a shell script) that prints the current fixture for
 * `-q -x` (and its GPUs for `-L`, their compute capability for `--query-gpu=…compute_cap`),
 * the only GPU fake the tests use. Switching fixtures is a file copy, so a running
 * agent sees a driver, count or model change on its next read.
 */
export function fakeNvidiaSmi(initial: Fixture): FakeNvidiaSmi {
  const binDir = mkdtempSync(join(tmpdir(), 'gf-fake-smi-'));
  const current = join(binDir, 'current.xml');
  const exitCode = join(binDir, 'current.exit');
  const list = join(binDir, 'current.list');
  const caps = join(binDir, 'current.caps');
  const script = join(binDir, 'nvidia-smi');
  const failure = join(binDir, 'current.failure');
  writeFileSync(
    script,
    `#!/bin/sh
# fake nvidia-smi for gpufarm agent tests
if [ -f "${failure}" ]; then
  cat "${failure}"
  exit "$(cat "${failure}.exit")"
fi
if [ ! -f "${current}" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
  exit 9
fi
case "$*" in
  *-x*) cat "${current}"; exit "$(cat "${exitCode}" 2>/dev/null || echo 0)" ;;
  -L) cat "${list}" ;;
  *compute_cap*)
    if [ -f "${caps}" ]; then cat "${caps}"; else echo '${NO_COMPUTE_CAP_FIELD}'; exit 2; fi ;;
  *) echo "fake nvidia-smi: only -q -x is recorded" >&2; exit 2 ;;
esac
`,
  );
  chmodSync(script, 0o755);
  const serve = (xml: string, exit: number, computeCaps: ReadonlyArray<string | null> | string | null) => {
    rmSync(failure, { force: true });
    writeFileSync(`${current}.tmp`, xml);
    // rename is atomic: a read in progress sees the old or the new fixture, never half of one
    renameSync(`${current}.tmp`, current);
    writeFileSync(exitCode, String(exit));
    // `-L` lists what the fixture lists, as the driver would.
    const { gpus } = parseNvidiaSmiXml(xml);
    writeFileSync(list, gpus.map((g) => `GPU ${g.index}: ${g.name} (UUID: ${g.uuid})\n`).join(''));
    const answer = computeCapAnswer(xml, computeCaps);
    if (answer === null) rmSync(caps, { force: true });
    else writeFileSync(caps, answer);
  };
  const use = (name: Fixture) => serve(readFileSync(fixturePath(name), 'utf8'), FIXTURE_EXIT_CODES[name] ?? 0, FIXTURE_COMPUTE_CAPS[name]);
  use(initial);
  return {
    binDir,
    path: `${binDir}${delimiter}${process.env.PATH ?? ''}`,
    use,
    useXml: (xml, computeCaps) => serve(xml, 0, computeCaps),
    breakDriver: () => rmSync(current, { force: true }),
    fail: (name) => {
      writeFileSync(`${failure}.exit`, String(FAILURE_FIXTURES[name]));
      writeFileSync(failure, readFileSync(fileURLToPath(new URL(`../fixtures/nvidia-smi/${name}.txt`, import.meta.url)), 'utf8'));
    },
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
