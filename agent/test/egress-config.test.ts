import t from 'tap';
import type { AssignmentSpec } from '@gpufarm/shared';
import { egressEnv, egressName, EGRESS_PROXY_URL, JOB_DNS } from '../src/egress/network.js';
import { toContainerConfig, type MachineFacts } from '../src/runtime/container-config.js';

const machine: MachineFacts = { simulated: true, cpuCores: 8, ramBytes: 16 * 1024 ** 3, egress: { image: `127.0.0.1:5000/gpufarm/egress-proxy@sha256:${'b'.repeat(64)}` } };
const placement = { name: 'gf-m1-asg_1', image: 'img', labels: {}, inputs: [], outputHostPath: '/o', imageUser: '' };
const network = { name: egressName('m1', 'asg_1'), env: egressEnv(), dns: JOB_DNS };

function spec(overrides: Partial<AssignmentSpec> = {}): AssignmentSpec {
  return {
    assignmentId: 'asg_1',
    jobId: 'job_1',
    image: 'img',
    imageDigest: null,
    command: [],
    env: { EPOCHS: '3' },
    gpus: [],
    cpuCores: null,
    ramBytes: null,
    maxRuntimeSeconds: 600,
    networkPolicy: { mode: 'allowlist', allow: ['pypi.org'] },
    inputs: [],
    outputRules: [{ path: '/output', maxBytes: 1024 }],
    ...overrides,
  };
}

t.test('default: an allowlist job runs on its network with the proxy variables and no DNS server', async (t) => {
  const c = toContainerConfig(spec(), machine, { ...placement, network });
  t.equal(c.HostConfig?.NetworkMode, 'gf-egress-m1-asg_1');
  t.same(c.HostConfig?.Dns, ['127.0.0.1']);
  t.equal(c.NetworkDisabled, false);
  t.same(c.Env, [
    'EPOCHS=3',
    `HTTPS_PROXY=${EGRESS_PROXY_URL}`,
    `HTTP_PROXY=${EGRESS_PROXY_URL}`,
    `https_proxy=${EGRESS_PROXY_URL}`,
    `http_proxy=${EGRESS_PROXY_URL}`,
    'NO_PROXY=localhost,127.0.0.1,::1',
    'no_proxy=localhost,127.0.0.1,::1',
    'GF_JOB_ID=job_1',
  ]);
  t.same(c.HostConfig?.CapDrop, ['ALL'], 'the same limits as any job');
  t.equal(EGRESS_PROXY_URL, 'http://gf-egress:3128');
});

t.test('behavior: mode none keeps NetworkMode none even on a machine with the proxy', async (t) => {
  const c = toContainerConfig(spec({ networkPolicy: { mode: 'none' } }), machine, { ...placement, network });
  t.equal(c.HostConfig?.NetworkMode, 'none');
  t.equal(c.NetworkDisabled, true);
  t.equal(c.HostConfig?.Dns, undefined);
  t.notOk(c.Env?.some((e) => /proxy/i.test(e)));
});

t.test('error: unsupported without the proxy, invalid for proxy variables of the job', async (t) => {
  t.throws(() => toContainerConfig(spec(), { ...machine, egress: undefined }, placement), { code: 'unsupported' });
  for (const name of ['HTTPS_PROXY', 'http_proxy', 'NO_PROXY', 'ALL_PROXY']) {
    t.throws(() => toContainerConfig(spec({ env: { [name]: 'http://elsewhere:1' } }), machine, { ...placement, network }), { code: 'invalid' }, name);
  }
});

t.test('args: egressName is stable and Docker-safe', async (t) => {
  t.equal(egressName('m 1', 'asg/1'), 'gf-egress-m_1-asg_1');
});
