import t from 'tap';
import { compareDriverVersions, GPU_CLASSES, minDriverFor } from '../src/catalog/gpu-classes.js';
import { EARNING_CODES, earningLine, earningVerdict, type EarningCode, type EarningFacts } from '../src/fleet/earning.js';
import { FABRIC_MANAGER_FIX, reasonWithFix, splitReasonFix } from '../src/fleet/pre-offer.js';

const HEARD = '2026-11-25T10:00:00.000Z';

/** A machine that is offered: online, verified, priced, its one RTX 4090 healthy. */
function facts(overrides: Partial<EarningFacts> = {}): EarningFacts {
  return {
    status: 'online',
    lastHeartbeatAt: HEARD,
    offlineSince: null,
    unenrolledAt: null,
    healthReason: null,
    probe: { state: 'passed', output: null },
    gpus: [{ index: 0, classId: 'rtx-4090-24gb', verdict: 'healthy', reasons: [] }],
    driverVersion: '550.54.15',
    pricePerGpuHourMicroUsd: 400_000,
    drainRequested: false,
    cordoned: false,
    farmStatus: 'active',
    verification: 'verified',
    verificationReason: null,
    currentJob: null,
    goingPrices: [{ classId: 'rtx-4090-24gb', medianPerGpuHourMicroUsd: 350_000 }],
    ...overrides,
  };
}

const PROBE_OUTPUT = 'GPU container probe failed: a container could not be started with the GPUs: could not select device driver "nvidia" with capabilities: [[gpu]]\nsecond line';

const cases: Array<{ code: EarningCode; earning: boolean; facts: EarningFacts; reason: RegExp; fix: RegExp | null }> = [
  { code: 'rented', earning: true, facts: facts({ currentJob: { jobId: 'job_1', since: HEARD }, drainRequested: true }), reason: /^Rented: job job_1 is running\.$/, fix: null },
  { code: 'offered', earning: true, facts: facts({ pricePerGpuHourMicroUsd: 300_000 }), reason: /^Offered at \$0\.30\/GPU-h; going price for RTX 4090 24GB is \$0\.35\/GPU-h\.$/, fix: null },
  { code: 'offline', earning: false, facts: facts({ status: 'offline', offlineSince: HEARD }), reason: /^Offline: no heartbeat from the agent\.$/, fix: /systemctl start gf-agent/ },
  { code: 'probe_failed', earning: false, facts: facts({ status: 'unhealthy', probe: { state: 'failed', output: PROBE_OUTPUT }, healthReason: PROBE_OUTPUT }), reason: /^GPU probe failed: a container could not be started with the GPUs: could not select device driver "nvidia" with capabilities: \[\[gpu\]\]\.$/, fix: /^Install nvidia-container-toolkit, .*restart docker, then run `gf-agent doctor`/ },
  { code: 'gpu_failed', earning: false, facts: facts({ gpus: [{ index: 0, classId: 'rtx-4090-24gb', verdict: 'failed', reasons: ['XID 79: the GPU has fallen off the bus'] }] }), reason: /GPU 0: XID 79: the GPU has fallen off the bus/, fix: /Reset or replace the GPUs/ },
  { code: 'unhealthy', earning: false, facts: facts({ status: 'unhealthy', probe: { state: 'passed', output: null }, healthReason: 'disk full under /var/lib/gf-agent' }), reason: /^Unhealthy: disk full under \/var\/lib\/gf-agent\.$/, fix: /gf-agent doctor/ },
  { code: 'driver_too_old', earning: false, facts: facts({ driverVersion: '470.82.01' }), reason: /^Driver too old: 470\.82\.01 is below 525\.60\.13, the oldest offered for RTX 4090 24GB\.$/, fix: /Install NVIDIA driver 525\.60\.13 or newer/ },
  { code: 'no_price', earning: false, facts: facts({ pricePerGpuHourMicroUsd: null }), reason: /^No price set/, fix: /Set a price per GPU-hour/ },
  { code: 'draining', earning: false, facts: facts({ drainRequested: true }), reason: /^Drained/, fix: /gf-agent undrain/ },
  { code: 'cordoned', earning: false, facts: facts({ cordoned: true }), reason: /^Cordoned by the service/, fix: /support/ },
  { code: 'farm_quarantined', earning: false, facts: facts({ farmStatus: 'quarantined' }), reason: /^The farm is quarantined/, fix: /support/ },
  {
    code: 'tier_unverified', earning: false,
    facts: facts({ verification: 'failed', verificationReason: 'GPU challenge chl_1 failed: the commitment came 9.1 s after the go, past the 6.2 s deadline.' }),
    reason: /^GPUs not proven: GPU challenge chl_1 failed: the commitment came 9\.1 s after the go, past the 6\.2 s deadline\.$/,
    fix: /^Fix what the reason says, then run `gf-agent doctor` on the machine; the challenge is tried again in 10 minutes or when the agent restarts\.$/,
  },
  { code: 'tier_unverified', earning: false, facts: facts({ verification: 'verifying' }), reason: /^Proving its GPUs: a GPU challenge is running on it\.$/, fix: /^Keep the agent running/ },
  { code: 'tier_unverified', earning: false, facts: facts({ verification: 'unverified' }), reason: /^GPUs not proven yet: it is offered once they pass a GPU challenge\.$/, fix: /runs by itself/ },
  {
    code: 'tier_unverified', earning: false,
    facts: facts({ verification: 'unverified', verificationReason: 'the driver or GPUs changed since the last GPU challenge (driver 550.54.15 -> 555.42.02); a new one runs' }),
    reason: /^GPUs not proven yet: the driver or GPUs changed since the last GPU challenge \(driver 550\.54\.15 -> 555\.42\.02\); a new one runs\.$/, fix: /runs by itself/,
  },
];

t.test('default: each code from the facts that make it, with a reason and a fix in words', async (t) => {
  t.same([...new Set(cases.map((c) => c.code))].sort(), [...EARNING_CODES].sort(), 'every code has a case');
  for (const c of cases) {
    const v = earningVerdict(c.facts);
    t.equal(v.code, c.code, c.code);
    t.equal(v.earning, c.earning, `${c.code}: earning`);
    t.match(v.reason, c.reason, `${c.code}: reason`);
    if (c.fix === null) t.equal(v.fix, null, `${c.code}: nothing to fix`);
    else t.match(v.fix ?? '', c.fix, `${c.code}: fix`);
  }
});

t.test('behavior: blockers are told in the order the operator clears them', async (t) => {
  const everything = facts({ status: 'offline', offlineSince: HEARD, drainRequested: true, pricePerGpuHourMicroUsd: null, driverVersion: '470.82.01', verification: 'unverified' });
  t.equal(earningVerdict(everything).code, 'offline', 'offline before everything the machine reports');
  t.equal(earningVerdict({ ...everything, status: 'online' }).code, 'draining');
  t.equal(earningVerdict({ ...everything, status: 'online', drainRequested: false }).code, 'driver_too_old');
  t.equal(earningVerdict({ ...everything, status: 'online', drainRequested: false, driverVersion: '550.54.15' }).code, 'no_price');
  t.equal(earningVerdict({ ...everything, status: 'online', drainRequested: false, driverVersion: '550.54.15', pricePerGpuHourMicroUsd: 1 }).code, 'tier_unverified');
  t.equal(earningVerdict(facts({ farmStatus: 'quarantined', status: 'offline' })).code, 'farm_quarantined', 'the farm before its machines');
});

t.test('behavior: offered tells a price above the going one, a withdrawn GPU and an unknown going price', async (t) => {
  const above = earningVerdict(facts({ pricePerGpuHourMicroUsd: 500_000 }));
  t.equal(above.code, 'offered');
  t.match(above.fix, /Lower the price toward the going price/);
  const twoGpus = earningVerdict(facts({
    goingPrices: [],
    gpus: [
      { index: 0, classId: 'rtx-4090-24gb', verdict: 'warning', reasons: ['thermal slowdown'] },
      { index: 1, classId: 'rtx-4090-24gb', verdict: 'failed', reasons: ['ECC double-bit errors'] },
    ],
  }));
  t.equal(twoGpus.code, 'offered', 'one failed GPU of two: the other is still offered');
  t.equal(twoGpus.reason, 'Offered at $0.40/GPU-h; going price for RTX 4090 24GB is not known yet. GPU 1 withdrawn (failed health checks).');
});

t.test('behavior: a probe not run yet, an unenrolled machine, a machine that never connected', async (t) => {
  t.match(earningVerdict(facts({ status: 'unhealthy', probe: { state: 'not_run', output: null } })).reason, /^GPU probe not run yet/);
  const unenrolled = earningVerdict(facts({ status: 'disabled', unenrolledAt: HEARD }));
  t.same([unenrolled.code, unenrolled.since], ['offline', HEARD]);
  t.match(unenrolled.reason, /^Unenrolled/);
  t.equal(earningVerdict(facts({ status: 'offline', lastHeartbeatAt: null })).reason, 'Offline: the agent never connected.');
  t.equal(earningVerdict(facts({ driverVersion: '535.54.03', gpus: [{ index: 0, classId: 'h100-80gb-sxm', verdict: 'healthy', reasons: [] }] })).code, 'offered', 'exactly the minimum is enough');
  t.equal(earningVerdict(facts({ driverVersion: '530.30.02', gpus: [{ index: 0, classId: 'h100-80gb-sxm', verdict: 'healthy', reasons: [] }] })).code, 'driver_too_old', 'Hopper wants R535');
});

t.test('behavior: the probe counts while the machine reports itself unhealthy, from its current reason', async (t) => {
  t.equal(earningVerdict(facts({ probe: { state: 'failed', output: PROBE_OUTPUT } })).code, 'offered', 'a stale failed probe of a machine now online');
  const fromReason = earningVerdict(facts({ status: 'unhealthy', probe: { state: 'passed', output: null }, healthReason: 'GPU container probe failed: a container sees 1 of 2 GPUs; missing GPU-b' }));
  t.equal(fromReason.code, 'probe_failed');
  t.equal(fromReason.reason, 'GPU probe failed: a container sees 1 of 2 GPUs; missing GPU-b.');
  t.match(fromReason.fix, /no GPU is hidden from containers/);
});

t.test('behavior: a failed pre-offer check names its own fix, and comes before a failed probe and failed GPUs', async (t) => {
  const reason = reasonWithFix('an NVSwitch system (8 GPU(s) with a fabric): the nvidia-fabricmanager.service service is inactive', FABRIC_MANAGER_FIX);
  const failedGpus = [{ index: 0, classId: 'h100-80gb-sxm', verdict: 'failed' as const, reasons: ['the NVSwitch fabric is not ready'] }];
  for (const probe of [{ state: 'passed', output: null }, { state: 'failed', output: reason }, { state: 'not_run', output: null }]) {
    const v = earningVerdict(facts({ status: 'unhealthy', healthReason: reason, probe, gpus: failedGpus }));
    t.match(v, { earning: false, code: 'unhealthy', reason: 'Unhealthy: an NVSwitch system (8 GPU(s) with a fabric): the nvidia-fabricmanager.service service is inactive.' }, `probe ${probe.state}`);
    t.equal(v.fix, `Install and start the fabric manager of the driver's exact version: \`systemctl enable --now nvidia-fabricmanager\` (on HGX B200 and newer also \`nvlsm\`), then check that \`nvidia-smi -q\` shows Fabric State Completed, Status Success, then run \`gf-agent doctor\` on the machine.`);
  }
  t.same(splitReasonFix('disk full'), { what: 'disk full', fix: null }, 'a reason without a fix keeps the generic one');
});

t.test('default: the printed line', async (t) => {
  t.equal(earningLine(earningVerdict(facts({ pricePerGpuHourMicroUsd: null }))), 'not earning: No price set: it is offered to no one. Fix: Set a price per GPU-hour on the Prices page or the machine page.');
  t.equal(earningLine(earningVerdict(facts({ currentJob: { jobId: 'job_1', since: null } }))), 'earning: Rented: job job_1 is running.');
  t.equal(
    earningLine(earningVerdict(facts({ status: 'offline', offlineSince: HEARD }))),
    `not earning: Offline: no heartbeat from the agent. (since ${HEARD}) Fix: Start the agent (\`systemctl start gf-agent\`) and check that the machine reaches the control plane, then run \`gf-agent status\`.`,
    'since when, between the reason and the fix',
  );
});

t.test('args: driver versions compare part by part as numbers; every class has a minimum', async (t) => {
  t.ok(compareDriverVersions('550.54.15', '535.54.03') > 0);
  t.ok(compareDriverVersions('535.9', '535.54.03') < 0, '9 < 54 as numbers');
  t.equal(compareDriverVersions('535.54.03', '535.54.3'), 0);
  t.ok(compareDriverVersions('garbage', '525.60.13') < 0, 'a malformed version is old');
  for (const c of GPU_CLASSES) t.match(minDriverFor(c), /^\d+\.\d+\.\d+$/, c.classId);
});

t.test('behavior: GPUs that are not offered are named with their reason; derived classes by their label and generation', async (t) => {
  const pascal = { index: 0, name: 'NVIDIA GeForce GTX 1080 Ti', reason: 'compute capability 6.1 (Pascal) is older than 7.5 (Turing), the oldest offered' };
  const none = earningVerdict(facts({ gpus: [], notOffered: [pascal] }));
  t.equal(none.code, 'unhealthy');
  t.equal(none.reason, 'No GPU is offered: GPU 0 (NVIDIA GeForce GTX 1080 Ti): compute capability 6.1 (Pascal) is older than 7.5 (Turing), the oldest offered.');
  t.match(none.fix, /compute capability 7\.5 \(Turing\) or newer/);
  t.equal(earningVerdict(facts({ gpus: [] })).reason, 'No GPU of a listed class is offered.', 'nothing detected at all');

  const mixed = earningVerdict(facts({ goingPrices: [], notOffered: [{ ...pascal, index: 1 }] }));
  t.equal(mixed.code, 'offered');
  t.match(mixed.reason, / Not offered: GPU 1 \(NVIDIA GeForce GTX 1080 Ti\): compute capability 6\.1 \(Pascal\)/);

  const derived = { index: 0, classId: 'derived-nvidia-rtx-a2000-12gb', verdict: 'healthy' as const, reasons: [] };
  const classes = [{ classId: 'derived-nvidia-rtx-a2000-12gb', label: 'RTX A2000 12GB', architecture: 'ampere' }];
  t.match(earningVerdict(facts({ gpus: [derived], classes, goingPrices: [] })).reason, /going price for RTX A2000 12GB is not known yet/);
  const old = earningVerdict(facts({ gpus: [derived], classes, driverVersion: '470.82.01' }));
  t.equal(old.code, 'driver_too_old', 'a derived class has its generation\'s minimum');
  t.match(old.reason, /below 525\.60\.13, the oldest offered for RTX A2000 12GB/);
  t.equal(earningVerdict(facts({ gpus: [{ ...derived, classId: 'derived-x-8gb' }], driverVersion: '470.82.01' })).code, 'offered', 'an unknown class has no minimum to check');
});
