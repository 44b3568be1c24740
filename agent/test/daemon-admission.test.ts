import t from 'tap';
import type { AssignmentSpec } from '@gpufarm/shared';
import { admitAssignment, admitChallenge, refusalDuringChallenge, type ChallengeAdmission } from '../src/daemon/admission.js';
import { outputUploadUrl } from '../src/daemon/runner-setup.js';

const spec = (gpus: Array<{ index: number; uuid: string }>): AssignmentSpec => ({
  assignmentId: 'asg_1', jobId: 'job_1', image: 'x', imageDigest: null, command: [], env: {}, gpus, cpuCores: null, ramBytes: null,
  maxRuntimeSeconds: 60, networkPolicy: { mode: 'none' }, inputs: [], outputRules: [{ path: '/output', maxBytes: 1 }],
});
const offer = { gpuUuids: ['GPU-a', 'GPU-b'], diskFreeBytes: 100, minFreeDiskBytes: 50 };

t.test('default: GPUs the machine offers and enough disk are admitted', async (t) => {
  t.equal(admitAssignment(spec([{ index: 1, uuid: 'GPU-b' }]), offer), null);
  t.equal(admitAssignment(spec([]), offer), null, 'a job without GPUs');
  t.equal(admitAssignment(spec([]), { ...offer, diskFreeBytes: null }), null, 'free disk unknown: not refused on a guess');
});

t.test('error: gpus_unavailable names each GPU the machine does not offer', async (t) => {
  t.match(admitAssignment(spec([{ index: 0, uuid: 'GPU-a' }, { index: 2, uuid: 'GPU-c' }]), offer), { accepted: false, reason: 'gpus_unavailable', message: /GPU 2 \(GPU-c\)/ });
  t.match(admitAssignment(spec([{ index: 0, uuid: 'GPU-a' }]), { ...offer, gpuUuids: [] }), { reason: 'gpus_unavailable' }, 'an unhealthy machine offers none');
});

t.test('error: not_ready below min_free_disk_bytes', async (t) => {
  t.match(admitAssignment(spec([]), { ...offer, diskFreeBytes: 49 }), { accepted: false, reason: 'not_ready', message: /49 bytes free, below min_free_disk_bytes \(50\)/ });
});

t.test('args: upload URLs are the route on the server origin, ids escaped', async (t) => {
  t.equal(outputUploadUrl('https://cp.example.com', 'asg_1', 'output-0'), 'https://cp.example.com/agent/v1/assignments/asg_1/outputs/output-0');
  t.equal(outputUploadUrl('http://127.0.0.1:8080/?x=1', 'asg_1', 'log'), 'http://127.0.0.1:8080/agent/v1/assignments/asg_1/outputs/log');
});

t.test('behavior: a GPU challenge runs only on idle, healthy GPUs the machine offers, simulated or real as it is', async (t) => {
  const idle: ChallengeAdmission = { heldAssignments: [], draining: false, activeChallengeId: null, simulated: true, unhealthyReason: null, gpuUuids: ['GPU-sim-l4-24gb-0', 'GPU-sim-l4-24gb-1'] };
  const challenge = { simulated: true, gpus: [{ index: 1, uuid: 'GPU-sim-l4-24gb-1' }] };
  t.equal(admitChallenge(challenge, idle), null);
  const cases: Array<[Partial<ChallengeAdmission>, string]> = [
    [{ activeChallengeId: 'chl_1' }, 'another GPU challenge (chl_1) is running on this machine'],
    [{ heldAssignments: ['asg_1', 'asg_2'] }, 'a job holds the GPUs (assignment asg_1, asg_2)'],
    [{ draining: true }, 'the machine is draining and takes no new work'],
    [{ simulated: null }, 'the machine has not read its inventory yet'],
    [{ unhealthyReason: 'the GPU probe failed' }, 'the machine is unhealthy: the GPU probe failed'],
    [{ simulated: false }, 'this machine has real GPUs, not simulated ones'],
    [{ gpuUuids: ['GPU-sim-l4-24gb-0'] }, 'this machine does not offer GPU 1 (GPU-sim-l4-24gb-1)'],
  ];
  for (const [machine, reason] of cases) t.equal(admitChallenge(challenge, { ...idle, ...machine }), reason, reason);
  t.same(refusalDuringChallenge('chl_1'), { accepted: false, reason: 'gpus_unavailable', message: "a GPU challenge (chl_1) is running on this machine's GPUs; it takes no assignment until the challenge ends" });
});
