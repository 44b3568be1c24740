import t from 'tap';
import {
  architectureOfDeviceId,
  derivedGpuClass,
  findGpuClass,
  GPU_CLASSES,
  gpuClassReference,
  isDerivedClassId,
  MIN_DRIVER_BY_ARCHITECTURE,
  minDriverFor,
  nominalMemoryGiB,
  normalizeGpuName,
  nvidiaDeviceId,
} from '../src/catalog/gpu-classes.js';
import { classifyGpu, type GpuFacts } from '../src/catalog/gpu-classify.js';
import { GPU_FAMILIES } from '../src/schemas/capacity.js';

const MiB = 1024 ** 2;

/** name, memory as nvidia-smi reports it (MiB), pci_device_id as printed, compute_cap, product_architecture. */
type Row = [name: string, mib: number, pciDeviceId: string | null, cc: string | null, arch: string | null, expected: string | RegExp];

/**
 * Product names and memory totals as drivers print them for each card (the memory a little
 * below the nominal size, 1/16 lower on GDDR cards with ECC on), device ids from the PCI ID
 * database. `expected`: the class id, or the reason the GPU is not offered.
 */
const ROWS: Row[] = [
  // Turing
  ['Tesla T4', 15360, '0x1EB810DE', '7.5', 'Turing', 't4-16gb'],
  ['Tesla T4', 15109, '1EB810DE', null, null, 't4-16gb'], // driver 440: no compute_cap, no architecture, the id without 0x
  ['NVIDIA GeForce GTX 1660 Ti', 6144, '0x218210DE', '7.5', 'Turing', 'gtx-1660-ti-6gb'],
  ['NVIDIA GeForce RTX 2080 Ti', 11264, '0x1E0710DE', '7.5', 'Turing', 'rtx-2080-ti-11gb'],
  ['GeForce RTX 2080 Ti', 11019, '1E0410DE', null, null, 'rtx-2080-ti-11gb'], // driver 418 spelling
  ['NVIDIA TITAN RTX', 24576, '0x1E0210DE', '7.5', 'Turing', 'titan-rtx-24gb'],
  ['Quadro RTX 6000', 24576, '0x1E3010DE', '7.5', 'Turing', 'quadro-rtx-6000-24gb'],
  ['Quadro RTX 8000', 49152, '0x1E3010DE', '7.5', 'Turing', 'quadro-rtx-8000-48gb'],
  ['NVIDIA Graphics Device', 46080, '0x1E3010DE', null, null, 'quadro-rtx-8000-48gb'], // one device id, told apart by memory
  ['NVIDIA GeForce RTX 2060', 6144, '0x1F0810DE', '7.5', 'Turing', 'derived-nvidia-geforce-rtx-2060-6gb'],
  // Ampere
  ['NVIDIA A100-SXM4-80GB', 81920, '0x20B210DE', '8.0', 'Ampere', 'a100-80gb'],
  ['NVIDIA A100 80GB PCIe', 81920, '0x20B510DE', '8.0', 'Ampere', 'a100-80gb'],
  ['NVIDIA A100-SXM4-40GB', 40960, '0x20B010DE', null, 'Ampere', 'a100-40gb'],
  ['NVIDIA A100-PCIE-40GB', 40536, '0x20F110DE', '8.0', 'Ampere', 'a100-40gb'],
  ['NVIDIA A30', 24576, '0x20B710DE', '8.0', 'Ampere', 'a30-24gb'],
  ['NVIDIA A40', 46068, '0x223510DE', '8.6', 'Ampere', 'a40-48gb'],
  ['NVIDIA A10', 23028, '0x223610DE', '8.6', 'Ampere', 'a10-24gb'],
  ['NVIDIA A10G', 23028, '0x223710DE', '8.6', 'Ampere', 'derived-nvidia-a10g-24gb'], // not an A10: a name is matched whole
  ['NVIDIA RTX A6000', 49140, '0x223010DE', '8.6', 'Ampere', 'rtx-a6000-48gb'],
  ['NVIDIA RTX A6000', 46068, '0x223010DE', '8.6', 'Ampere', 'rtx-a6000-48gb'], // ECC on
  ['NVIDIA RTX A5000', 24564, '0x223110DE', '8.6', 'Ampere', 'rtx-a5000-24gb'],
  ['NVIDIA RTX A4000', 16376, '0x24B010DE', '8.6', 'Ampere', 'rtx-a4000-16gb'],
  ['NVIDIA GeForce RTX 3090 Ti', 24564, '0x220310DE', '8.6', 'Ampere', 'rtx-3090-ti-24gb'],
  ['NVIDIA GeForce RTX 3090', 24576, '0x220410DE', '8.6', 'Ampere', 'rtx-3090-24gb'],
  ['NVIDIA GeForce RTX 3080 Ti', 12288, '0x220810DE', '8.6', 'Ampere', 'rtx-3080-ti-12gb'],
  ['NVIDIA GeForce RTX 3080', 10240, '0x220610DE', '8.6', 'Ampere', 'rtx-3080-10gb'],
  ['NVIDIA GeForce RTX 3080', 12288, '0x220A10DE', '8.6', 'Ampere', 'derived-nvidia-geforce-rtx-3080-12gb'], // the 12 GB card: memory tells
  ['NVIDIA GeForce RTX 3070', 8192, '0x248410DE', '8.6', 'Ampere', 'rtx-3070-8gb'],
  ['NVIDIA GeForce RTX 3060 Ti', 8192, '0x248910DE', '8.6', 'Ampere', 'rtx-3060-ti-8gb'],
  ['NVIDIA GeForce RTX 3060', 12288, '0x250410DE', '8.6', 'Ampere', 'rtx-3060-12gb'],
  ['NVIDIA GeForce RTX 3060', 8192, '0x250310DE', '8.6', 'Ampere', 'derived-nvidia-geforce-rtx-3060-8gb'],
  ['NVIDIA RTX A2000 12GB', 12282, '0x257110DE', '8.6', 'Ampere', 'derived-nvidia-rtx-a2000-12gb'],
  // Ada Lovelace
  ['NVIDIA L40S', 46068, '0x26B910DE', '8.9', 'Ada Lovelace', 'l40s-48gb'],
  ['NVIDIA L40', 46068, '0x26B510DE', '8.9', 'Ada Lovelace', 'l40-48gb'],
  ['NVIDIA L4', 23034, '0x27B810DE', '8.9', 'Ada Lovelace', 'l4-24gb'],
  ['NVIDIA L4', 23034, null, null, 'Ada Lovelace', 'l4-24gb'], // only the architecture printed
  ['NVIDIA RTX 6000 Ada Generation', 49140, '0x26B110DE', '8.9', 'Ada Lovelace', 'rtx-6000-ada-48gb'],
  ['NVIDIA RTX 5000 Ada Generation', 32760, '0x26B210DE', '8.9', 'Ada Lovelace', 'rtx-5000-ada-32gb'],
  ['NVIDIA RTX 4000 Ada Generation', 20475, '0x27B210DE', '8.9', 'Ada Lovelace', 'rtx-4000-ada-20gb'],
  ['NVIDIA RTX 4000 SFF Ada Generation', 20475, '0x27B010DE', '8.9', 'Ada Lovelace', 'rtx-4000-sff-ada-20gb'],
  ['NVIDIA GeForce RTX 4090', 24564, '0x268410DE', '8.9', 'Ada Lovelace', 'rtx-4090-24gb'],
  ['NVIDIA GeForce RTX 4090', 49140, '0x268410DE', '8.9', 'Ada Lovelace', 'derived-nvidia-geforce-rtx-4090-48gb'], // a 48 GB memory mod
  ['NVIDIA GeForce RTX 4090 D', 24564, '0x268510DE', '8.9', 'Ada Lovelace', 'derived-nvidia-geforce-rtx-4090-d-24gb'],
  ['NVIDIA GeForce RTX 4090 Laptop GPU', 16376, '0x275710DE', '8.9', 'Ada Lovelace', 'derived-nvidia-geforce-rtx-4090-laptop-gpu-16gb'],
  ['NVIDIA GeForce RTX 4080 SUPER', 16376, '0x270210DE', '8.9', 'Ada Lovelace', 'rtx-4080-super-16gb'],
  ['NVIDIA GeForce RTX 4080', 16376, '0x270410DE', '8.9', 'Ada Lovelace', 'rtx-4080-16gb'],
  ['NVIDIA GeForce RTX 4070 Ti SUPER', 16376, '0x270510DE', '8.9', 'Ada Lovelace', 'rtx-4070-ti-super-16gb'],
  ['NVIDIA GeForce RTX 4070 Ti', 12282, '0x278210DE', '8.9', 'Ada Lovelace', 'rtx-4070-ti-12gb'],
  ['NVIDIA GeForce RTX 4070 SUPER', 12282, '0x278310DE', '8.9', 'Ada Lovelace', 'rtx-4070-super-12gb'],
  ['NVIDIA GeForce RTX 4070', 12282, '0x278610DE', '8.9', 'Ada Lovelace', 'rtx-4070-12gb'],
  ['NVIDIA GeForce RTX 4060 Ti', 16380, '0x280510DE', '8.9', 'Ada Lovelace', 'rtx-4060-ti-16gb'],
  ['NVIDIA GeForce RTX 4060 Ti', 8188, '0x280310DE', '8.9', 'Ada Lovelace', 'derived-nvidia-geforce-rtx-4060-ti-8gb'],
  // Hopper
  ['NVIDIA H100 80GB HBM3', 81559, '0x233010DE', '9.0', 'Hopper', 'h100-80gb-sxm'],
  ['NVIDIA H100 PCIe', 81559, '0x233110DE', '9.0', 'Hopper', 'h100-80gb-pcie'],
  ['NVIDIA H100 NVL', 95830, '0x232110DE', '9.0', 'Hopper', 'h100-nvl-94gb'],
  ['NVIDIA H200', 143771, '0x233510DE', '9.0', 'Hopper', 'h200-141gb'],
  ['NVIDIA Graphics Device', 143771, '0x233510DE', '9.0', 'Hopper', 'h200-141gb'], // a driver older than the card
  ['NVIDIA GH200 480GB', 97871, '0x234210DE', '9.0', 'Hopper', 'derived-nvidia-gh200-480gb-96gb'],
  // Blackwell
  ['NVIDIA B200', 183359, '0x290110DE', '10.0', 'Blackwell', 'b200-180gb'],
  ['NVIDIA Graphics Device', 183359, '0x290110DE', '10.0', 'Blackwell', 'b200-180gb'],
  ['NVIDIA GeForce RTX 5090', 32607, '0x2B8510DE', '12.0', 'Blackwell', 'rtx-5090-32gb'],
  ['NVIDIA RTX PRO 6000 Blackwell Workstation Edition', 97887, '0x2BB110DE', '12.0', 'Blackwell', 'rtx-pro-6000-blackwell-96gb'],
  ['NVIDIA RTX PRO 6000 Blackwell Server Edition', 97887, '0x2BB510DE', '12.0', 'Blackwell', 'rtx-pro-6000-blackwell-96gb'],
  ['NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition', 97887, '0x2BB410DE', '12.0', 'Blackwell', 'rtx-pro-6000-blackwell-96gb'],
  ['NVIDIA GeForce RTX 5080', 16303, '0x2C0210DE', '12.0', 'Blackwell', 'rtx-5080-16gb'],
  ['NVIDIA GeForce RTX 5070 Ti', 16303, '0x2C0510DE', '12.0', 'Blackwell', 'rtx-5070-ti-16gb'],
  ['NVIDIA GeForce RTX 5060 Ti', 16311, '0x2D0410DE', '12.0', 'Blackwell', 'derived-nvidia-geforce-rtx-5060-ti-16gb'],
  ['NVIDIA B300 SXM6 AC', 275040, '0x318210DE', '10.3', 'Blackwell', 'derived-nvidia-b300-sxm6-ac-288gb'],
  ['NVIDIA Graphics Device', 98304, '0x330010DE', null, null, 'derived-nvidia-device-3300-96gb'], // an id newer than the table
  // Not offered
  ['NVIDIA GeForce GTX 1080 Ti', 11264, '0x1B0610DE', '6.1', 'Pascal', /^compute capability 6\.1 \(Pascal\) is older than 7\.5 \(Turing\), the oldest offered/],
  ['Tesla P100-PCIE-12GB', 11567, '15F710DE', null, null, /^compute capability 6\.0 \(Pascal\) is older than 7\.5/], // driver 375
  ['Tesla V100-SXM2-32GB', 32510, '0x1DB510DE', '7.0', 'Volta', /^compute capability 7\.0 \(Volta\) is older than 7\.5/],
  ['Tesla K80', 11441, '0x102D10DE', '3.7', 'Kepler', /^compute capability 3\.7 \(Kepler\)/],
  ['NVIDIA GeForce RTX 4090', 11264, '0x1B0610DE', null, null, /\(Pascal\)/], // a name is not trusted against the device id
  ['NVIDIA GeForce RTX 4090', 24564, null, null, null, /^its generation cannot be told: .*no NVIDIA PCI device id.*a product name alone is not trusted/],
  ['NVIDIA GeForce RTX 4090', 24564, '0x0FFF10DF', null, 'Unknown', /no NVIDIA PCI device id/], // another vendor's id
];

t.test('classifyGpu: real product names, memory totals and device ids of each generation', async (t) => {
  for (const [name, mib, pciDeviceId, cc, arch, expected] of ROWS) {
    const facts: GpuFacts = { name, vramBytes: mib * MiB, pciDeviceId, computeCapability: cc, productArchitecture: arch };
    const c = classifyGpu(facts);
    const label = `${name} ${mib} MiB ${pciDeviceId ?? '-'}`;
    if (typeof expected === 'string') {
      t.equal(c.gpuClass?.classId, expected, label);
      t.equal(c.offered, true, `${label}: offered`);
      t.equal(c.reason, null, `${label}: no reason`);
    } else {
      t.equal(c.offered, false, `${label}: not offered`);
      t.equal(c.gpuClass, null);
      t.match(c.reason, expected, `${label}: the reason`);
    }
  }
});

t.test('classifyGpu: a card from each curated class, under its own name and as "Graphics Device"', async (t) => {
  for (const cls of GPU_CLASSES) {
    const mib = Math.round((cls.vramBytes / MiB) * 0.97);
    const id = `0x${cls.pciDeviceIds[0]!.toString(16).toUpperCase().padStart(4, '0')}10DE`;
    t.equal(classifyGpu({ name: cls.model, vramBytes: mib * MiB, pciDeviceId: id, computeCapability: null, productArchitecture: null }).gpuClass?.classId, cls.classId, cls.model);
    const unnamed = classifyGpu({ name: 'NVIDIA Graphics Device', vramBytes: mib * MiB, pciDeviceId: id, computeCapability: null, productArchitecture: null });
    t.equal(unnamed.gpuClass?.classId, cls.classId, `${cls.classId} by its device id alone`);
  }
});

t.test('classifyGpu: the generation, compute capability and derived class of a card no class lists', async (t) => {
  const c = classifyGpu({ name: 'NVIDIA RTX A2000 12GB', vramBytes: 12282 * MiB, pciDeviceId: '0x257110DE', computeCapability: null, productArchitecture: 'Ampere' });
  t.match(c, { offered: true, architecture: 'ampere', computeCapability: '8.6' }, 'the compute capability of its chip when the driver gives none');
  t.match(c.gpuClass, { classId: 'derived-nvidia-rtx-a2000-12gb', label: 'RTX A2000 12GB', model: 'NVIDIA RTX A2000 12GB', family: 'workstation', vramBytes: 12 * 1024 ** 3, architecture: 'ampere', origin: 'derived' });
  t.match(c.gpuClass?.figureSource, /^derived class: .*Ampere floor/);
  const floor = Math.min(...GPU_CLASSES.filter((k) => k.architecture === 'ampere').map((k) => k.expectedMatmulGflops));
  t.equal(c.gpuClass?.expectedMatmulGflops, floor, 'judged against the lowest curated Ampere figure');
  t.same(gpuClassReference('derived-nvidia-rtx-a2000-12gb', 'ampere'), { matmulGflops: floor, memoryBandwidthMbps: c.gpuClass?.expectedMemoryBandwidthMbps, maxTier: 'A' });
  t.equal(gpuClassReference('derived-nvidia-rtx-a2000-12gb', null), undefined, 'a derived class needs its generation');
  t.equal(gpuClassReference('no-such-class', 'ampere'), undefined);
  t.match(gpuClassReference('h100-80gb-sxm', null), { maxTier: 'S' });

  const cc = classifyGpu({ name: 'NVIDIA GeForce RTX 4090', vramBytes: 24564 * MiB, pciDeviceId: '0x268410DE', computeCapability: '8.9', productArchitecture: 'Ampere' });
  t.match(cc, { architecture: 'ada', gpuClass: { classId: 'rtx-4090-24gb' } }, 'the compute capability outranks a wrong architecture label');
  t.equal(classifyGpu({ name: 'NVIDIA GeForce RTX 4090', vramBytes: 24564 * MiB, pciDeviceId: '0x268410DE', computeCapability: '6.1', productArchitecture: null }).offered, false, 'and the device id');
});

t.test('derivedGpuClass: stable ids within 64 characters, families from the name', async (t) => {
  const long = derivedGpuClass({ name: 'NVIDIA RTX PRO 4500 Blackwell Max-Q Workstation Edition With A Very Long Name', vramBytes: 32 * 1024 ** 3, architecture: 'blackwell', pciDeviceId: 0x2c31 });
  t.ok(long.classId.length <= 64, long.classId);
  t.ok(isDerivedClassId(long.classId), 'a derived id by its shape');
  t.match(long.classId, /-32gb$/, 'the memory size is kept');
  t.equal(derivedGpuClass({ name: 'GeForce RTX 2060', vramBytes: 6 * 1024 ** 3, architecture: 'turing', pciDeviceId: null }).classId, 'derived-nvidia-geforce-rtx-2060-6gb', 'the same id without the NVIDIA prefix older drivers leave out');
  t.equal(derivedGpuClass({ name: 'NVIDIA A16', vramBytes: 15 * 1024 ** 3, architecture: 'ampere', pciDeviceId: 0x25b6 }).family, 'datacenter');
  t.equal(derivedGpuClass({ name: 'NVIDIA GeForce RTX 3050', vramBytes: 8 * 1024 ** 3, architecture: 'ampere', pciDeviceId: 0x2507 }).family, 'consumer');
  t.equal(derivedGpuClass({ name: 'NVIDIA T1000 8GB', vramBytes: 8 * 1024 ** 3, architecture: 'turing', pciDeviceId: 0x1ff0 }).family, 'workstation');
  t.match(derivedGpuClass({ name: 'Graphics Device', vramBytes: 80 * 1024 ** 3, architecture: 'hopper', pciDeviceId: 0x2338 }), { classId: 'derived-nvidia-device-2338-80gb', label: 'NVIDIA GPU 2338 80GB' });
});

t.test('helpers: names, memory sizes, device ids', async (t) => {
  t.equal(normalizeGpuName('NVIDIA A100-SXM4-80GB'), 'a100 sxm4 80gb');
  t.equal(normalizeGpuName('  Quadro   RTX 6000 '), 'quadro rtx 6000');
  for (const [mib, gib] of [[15109, 16], [15360, 16], [23034, 24], [46068, 48], [81559, 80], [11264, 11], [143771, 141], [183359, 180], [12282, 12]] as const) {
    t.equal(nominalMemoryGiB(mib * MiB), gib, `${mib} MiB is sold as ${gib} GB`);
  }
  t.equal(nvidiaDeviceId('0x233010DE'), 0x2330);
  t.equal(nvidiaDeviceId('15F710DE'), 0x15f7);
  t.equal(nvidiaDeviceId('0x73BF1002'), null, 'not NVIDIA');
  t.equal(nvidiaDeviceId('N/A'), null);
  t.match(architectureOfDeviceId(0x2330), { architecture: 'hopper', computeCapability: '9.0' });
  t.match(architectureOfDeviceId(0x2182), { architecture: 'turing', computeCapability: '7.5' });
  t.match(architectureOfDeviceId(0x2b85), { architecture: 'blackwell', computeCapability: '12.0' });
  t.equal(architectureOfDeviceId(0x0100), null, 'an id in no range');
});

t.test('the catalog: unique ids and names, names as normalized, device ids in their generation, each figure with its source', async (t) => {
  const ids = new Set<string>();
  const names = new Map<string, string>();
  for (const c of GPU_CLASSES) {
    t.notOk(ids.has(c.classId), `${c.classId} is unique`);
    ids.add(c.classId);
    t.notOk(isDerivedClassId(c.classId), `${c.classId} is no derived id`);
    t.ok((GPU_FAMILIES as readonly string[]).includes(c.family), `${c.classId}: family`);
    t.ok(c.names.includes(normalizeGpuName(c.model)), `${c.classId}: its model is one of its names`);
    for (const n of c.names) {
      t.equal(normalizeGpuName(n), n, `${c.classId}: "${n}" is normalized`);
      t.notOk(names.has(n), `${c.classId}: "${n}" belongs to no other class`);
      names.set(n, c.classId);
    }
    for (const id of c.pciDeviceIds) t.equal(architectureOfDeviceId(id)?.architecture, c.architecture, `${c.classId}: device 0x${id.toString(16)} is ${c.architecture}`);
    t.ok(c.expectedMatmulGflops > 0 && c.expectedMemoryBandwidthMbps > 0, `${c.classId}: figures`);
    t.match(c.figureSource, /^vendor peak × efficiency, not yet measured on this model: matmul [\d.]+ TFLOPS .* memory [\d.]+ GB\/s × .*; peak figures: \S/, `${c.classId}: how its figures were obtained`);
    t.equal(c.origin, 'curated');
    t.equal(findGpuClass(c.classId), c);
    t.match(minDriverFor(c), /^\d+\.\d+\.\d+$/);
  }
  t.equal(minDriverFor(findGpuClass('b200-180gb')!), '570.133.20', 'HGX B200 needs 570.133.20 (NVIDIA GPU Operator platform support)');
  t.equal(minDriverFor(findGpuClass('rtx-5090-32gb')!), MIN_DRIVER_BY_ARCHITECTURE.blackwell);
  for (const generation of ['turing', 'ampere', 'ada', 'hopper', 'blackwell'] as const) {
    t.ok(GPU_CLASSES.some((c) => c.architecture === generation), `${generation} has curated classes`);
  }
});
