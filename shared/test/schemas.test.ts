import t from 'tap';
import type { z } from 'zod';
import {
  artifactMetadataSchema,
  billingListSchema,
  capacityListSchema,
  formatFieldPath,
  fundConfirmRequestSchema,
  fundConfirmResponseSchema,
  fundingSchema,
  isTerminalStatus,
  issuesToDetails,
  JOB_STATUSES,
  jobCreatedSchema,
  jobListSchema,
  jobSchema,
  listEnvelopeSchema,
  logListSchema,
  pricingSchema,
  utf8ByteLength,
  type Job,
} from '../src/index.js';

const hex = (c: string, n: number) => `0x${c.repeat(n)}`;
const sha = (c: string) => c.repeat(64);
const TIME = '2026-10-01T12:00:00.000Z';
const ZERO_ADDRESS = hex('0', 40);
const STABLE = hex('a', 40);
const WALLET = '0x5B38Da6a701c568545dCfcB03FcB875f56beddC4';

const createdJob: Job = {
  object: 'job',
  id: 'job_01J9ZABC',
  status: 'CREATED',
  verificationLevel: null,
  pricing: {
    maxPricePerGpuHourMicroUsd: 2_500_000,
    minBillingSeconds: 60,
    platformFeeBps: 1000,
    estimateLowMicroUsd: 41_667,
    estimateHighMicroUsd: 2_750_000,
    maxCostMicroUsd: 2_750_000,
  },
  payment: { token: STABLE, symbol: 'USDC', decimals: 6, maxPayment: '2750000', escrowJobKey: hex('1', 64) },
  links: {
    dashboard: 'https://gpufarm.example/dashboard/jobs/job_01J9ZABC',
    logs: 'https://api.gpufarm.example/v1/jobs/job_01J9ZABC/logs',
    funding: 'https://api.gpufarm.example/v1/jobs/job_01J9ZABC/funding',
  },
  assignment: null,
  cost: null,
  result: null,
  receipt: null,
  artifacts: [],
  startup: null,
};

const completedJob: Job = {
  ...createdJob,
  status: 'COMPLETED',
  verificationLevel: 'EXECUTION_VERIFIED',
  payment: { token: ZERO_ADDRESS, symbol: 'ETH', decimals: 18, maxPayment: '1100000000000000000000', escrowJobKey: hex('2', 64) },
  assignment: {
    gpu: { model: 'NVIDIA GeForce RTX 4090', modelClass: 'rtx-4090-24gb', count: 1 },
    farm: { slug: 'north-farm', name: 'North Farm' },
    region: 'europe-west',
    pricePerGpuHourMicroUsd: 450_000,
    startedAt: TIME,
    finishedAt: '2026-10-01T12:10:00Z',
    exitCode: 0,
  },
  cost: { billableGpuSeconds: 600, computeMicroUsd: 75_000, feeMicroUsd: 7_500, totalMicroUsd: 82_500, finalPayment: '33000000000000000' },
  result: { hostHash: sha('c'), serverHash: sha('c'), hashesMatch: true, outputArtifactId: 'art_out', logArtifactId: 'art_log' },
  receipt: {
    jobKey: hex('2', 64),
    status: 'completed',
    amount: '33000000000000000',
    computeSeconds: 600,
    resultHash: `0x${sha('c')}`,
    challengeEndsAt: '2026-10-02T12:10:00Z',
    transactions: { fund: hex('3', 64), completion: hex('4', 64), release: null, refund: null },
    disputeEndsAt: null,
    disputeOutcome: null,
    withdrawal: null,
  },
  artifacts: [
    { id: 'art_out', kind: 'output', filename: 'output.tar', sizeBytes: 10_240, sha256: sha('c') },
    { id: 'art_log', kind: 'log', filename: 'logs.txt', sizeBytes: 512, sha256: sha('d') },
  ],
  startup: {
    assignmentId: 'asg_1',
    attempt: 1,
    phases: {
      queued: { status: 'done', startedAt: '2026-10-01T11:59:58.000Z', endedAt: '2026-10-01T11:59:59.000Z', durationMs: 1000 },
      dispatch: { status: 'done', startedAt: '2026-10-01T11:59:59.000Z', endedAt: '2026-10-01T11:59:59.500Z', durationMs: 500 },
      pull: { status: 'skipped', startedAt: null, endedAt: null, durationMs: null },
      container: { status: 'done', startedAt: '2026-10-01T11:59:59.500Z', endedAt: TIME, durationMs: 500 },
      firstLog: { status: 'done', startedAt: TIME, endedAt: '2026-10-01T12:00:00.200Z', durationMs: 200 },
      run: { status: 'done', startedAt: TIME, endedAt: '2026-10-01T12:10:00.000Z', durationMs: 600_000 },
      upload: { status: 'done', startedAt: '2026-10-01T12:10:00.000Z', endedAt: '2026-10-01T12:10:01.000Z', durationMs: 1000 },
    },
  },
};

const funding = {
  object: 'funding',
  signer: WALLET,
  calls: [
    { title: 'Approve USDC', to: STABLE, data: `0x095ea7b3${'0'.repeat(128)}`, value: '0' },
    { title: 'Create escrow job', to: hex('e', 40), data: '0xdeadbeef', value: '0' },
  ],
};

const samples: [string, z.ZodType, unknown][] = [
  ['job (created)', jobSchema, createdJob],
  ['job (completed)', jobSchema, completedJob],
  ['job list', jobListSchema, { object: 'list', data: [createdJob, completedJob], nextCursor: 'job_01J9ZABC' }],
  [
    'job.created',
    jobCreatedSchema,
    {
      object: 'job.created',
      job: createdJob,
      estimate: { lowMicroUsd: 41_667, highMicroUsd: 2_750_000, assumptions: ['runtime 60-3600 s'], matchedClasses: ['rtx-4090-24gb'] },
      policy: { verdict: 'allowed', findings: [{ rule: 'network.allowlist', field: 'networkPolicy.allow[0]', message: 'egress to huggingface.co allowed' }] },
      funding,
      fundingUnavailable: null,
      defaults: [
        { field: 'maxRuntimeSeconds', value: 3600 },
        { field: 'networkPolicy', value: { mode: 'none' } },
        { field: 'outputRules', value: [{ path: '/output', maxBytes: 1_073_741_824 }] },
      ],
      idempotentReplay: false,
    },
  ],
  [
    'job.created without funding',
    jobCreatedSchema,
    {
      object: 'job.created',
      job: createdJob,
      estimate: { lowMicroUsd: 0, highMicroUsd: 0, assumptions: [], matchedClasses: [] },
      policy: { verdict: 'allowed', findings: [] },
      funding: null,
      fundingUnavailable: { code: 'chain_unavailable', message: 'The chain RPC did not answer; retry GET /v1/jobs/:id/funding.' },
      defaults: [],
      idempotentReplay: true,
    },
  ],
  ['funding', fundingSchema, funding],
  ['fund-confirm request', fundConfirmRequestSchema, { txHash: hex('f', 64) }],
  [
    'fund-confirm response',
    fundConfirmResponseSchema,
    { object: 'funding.confirmation', status: 'confirmed', message: 'Funding confirmed; the job is queued.', job: { ...createdJob, status: 'QUEUED' } },
  ],
  [
    'capacity list',
    capacityListSchema,
    {
      object: 'list',
      chainId: 4663,
      generatedAt: TIME,
      nextCursor: null,
      data: [
        {
          id: 'off_1',
          kind: 'farm',
          farm: { slug: 'north-farm', name: 'North Farm' },
          provider: 'North Farm',
          gpu: { classId: 'rtx-4090-24gb', label: 'RTX 4090 24GB', model: 'NVIDIA GeForce RTX 4090', vendor: 'nvidia', family: 'consumer', vramBytes: 25_769_803_776, cudaVersion: '12.4', driverVersion: '550.54.15' },
          count: 8,
          available: 6,
          busy: 2,
          maxAvailablePerMachine: 4,
          maxPerMachine: 4,
          machines: 2,
          combinedVramBytes: 206_158_430_208,
          benchmarkTier: 'A',
          uptimePct: 99.7,
          region: { key: 'europe-west', label: 'Europe West', group: 'Europe' },
          price: { perGpuHourMicroUsd: 450_000, maxPerGpuHourMicroUsd: 600_000, minBillingSeconds: 60 },
          queue: 0,
          status: 'AVAILABLE',
          workloads: ['inference', 'batch'],
          simulated: false,
          proof: { proven: true, provenAt: '2026-03-01T09:30:00.125Z' },
        },
        {
          id: 'off_2',
          kind: 'farm',
          farm: { slug: 'sim', name: 'Simulated' },
          provider: 'Simulated',
          gpu: { classId: 'l4-24gb', label: 'L4 24GB', model: 'NVIDIA L4', vendor: 'nvidia', family: 'datacenter', vramBytes: 25_769_803_776, cudaVersion: null, driverVersion: null },
          count: 1,
          available: 0,
          busy: 1,
          maxAvailablePerMachine: 0,
          maxPerMachine: 1,
          machines: 1,
          combinedVramBytes: 25_769_803_776,
          benchmarkTier: 'C',
          uptimePct: 0,
          region: { key: 'us-east', label: 'US East', group: 'North America' },
          price: { perGpuHourMicroUsd: 300_000, maxPerGpuHourMicroUsd: 300_000, minBillingSeconds: 120 },
          queue: 3,
          status: 'BUSY',
          workloads: null,
          simulated: true,
          proof: { proven: false, provenAt: null },
        },
      ],
    },
  ],
  [
    'pricing',
    pricingSchema,
    {
      object: 'pricing',
      chainId: 4663,
      currency: 'USD',
      unit: 'micro-USD per GPU-hour',
      platformFeeBps: 1000,
      minBillingSeconds: { min: 60, max: 300 },
      paymentAssets: [
        { kind: 'eth', token: ZERO_ADDRESS, symbol: 'ETH', decimals: 18 },
        { kind: 'stable', token: STABLE, symbol: 'USDC', decimals: 6 },
      ],
      classes: [
        { classId: 'rtx-4090-24gb', label: 'RTX 4090 24GB', family: 'consumer', vramBytes: 25_769_803_776, gpusOnline: 8, gpusBusy: 2, gpusAvailable: 6, gpusPriced: 8, minPerGpuHourMicroUsd: 400_000, medianPerGpuHourMicroUsd: 450_000, maxPerGpuHourMicroUsd: 600_000 },
        { classId: 'h100-80gb-sxm', label: 'H100 80GB SXM', family: 'datacenter', vramBytes: 85_899_345_920, gpusOnline: 0, gpusBusy: 0, gpusAvailable: 0, gpusPriced: 0, minPerGpuHourMicroUsd: null, medianPerGpuHourMicroUsd: null, maxPerGpuHourMicroUsd: null },
      ],
    },
  ],
  [
    'log list',
    logListSchema,
    {
      object: 'list',
      jobStatus: 'RUNNING',
      nextCursor: '42',
      data: [
        { id: 41, assignmentId: 'asg_1', seq: 0, stream: 'system', line: 'pulling image', at: TIME },
        { id: 42, assignmentId: 'asg_1', seq: 1, stream: 'stdout', line: '', at: TIME },
      ],
    },
  ],
  [
    'artifact metadata',
    artifactMetadataSchema,
    {
      object: 'artifact',
      id: 'art_out',
      kind: 'output',
      filename: 'output.tar',
      sizeBytes: 10_240,
      sha256: sha('c'),
      jobId: 'job_01J9ZABC',
      createdAt: TIME,
      expiresAt: '2026-10-31T12:00:00Z',
      url: 'https://api.gpufarm.example/files/art_out?sig=abc&exp=1790000000',
      urlExpiresAt: '2026-10-01T12:02:00Z',
    },
  ],
  [
    'billing list',
    billingListSchema,
    {
      object: 'list',
      nextCursor: null,
      data: [
        { object: 'billing_entry', id: 'bil_1', type: 'funded', jobId: 'job_01J9ZABC', amountMicroUsd: 2_750_000, token: STABLE, amount: '2750000', txHash: hex('3', 64), createdAt: TIME },
        { object: 'billing_entry', id: 'bil_2', type: 'charge', jobId: 'job_01J9ZABC', amountMicroUsd: 82_500, token: null, amount: null, txHash: null, createdAt: TIME },
      ],
    },
  ],
];

t.test('behavior: sample resources survive a JSON round trip unchanged', async (t) => {
  for (const [name, schema, sample] of samples) {
    const r = schema.safeParse(JSON.parse(JSON.stringify(sample)));
    t.ok(r.success, `${name} parses${r.success ? '' : `: ${JSON.stringify(r.error.issues)}`}`);
    if (r.success) t.same(r.data, sample, `${name} is unchanged`);
  }
});

t.test('error: a response with a missing, extra or mistyped field is refused', async (t) => {
  const without = (key: keyof Job) => Object.fromEntries(Object.entries(createdJob).filter(([k]) => k !== key));
  t.notOk(jobSchema.safeParse(without('assignment')).success, 'absent values are null, never omitted');
  t.notOk(jobSchema.safeParse(without('verificationLevel')).success);
  t.notOk(jobSchema.safeParse({ ...createdJob, hostIp: '10.0.0.5' }).success, 'leaked fields are caught');
  t.notOk(jobSchema.safeParse({ ...createdJob, assignment: { ...completedJob.assignment, machineHostname: 'rig-7' } }).success);
  t.notOk(jobSchema.safeParse({ ...createdJob, status: 'DONE' }).success);
  t.notOk(jobSchema.safeParse({ ...createdJob, pricing: { ...createdJob.pricing, maxCostMicroUsd: 2.75 } }).success, 'micro-USD are integers');
  t.notOk(jobSchema.safeParse({ ...createdJob, payment: { ...createdJob.payment, maxPayment: 2_750_000 } }).success, 'token amounts are strings');
  t.notOk(jobSchema.safeParse({ ...completedJob, receipt: { ...completedJob.receipt, transactions: { fund: hex('3', 64), completion: null, release: null } } }).success);
  t.notOk(jobSchema.safeParse({ ...completedJob, assignment: { ...completedJob.assignment, region: 'rack-7-building-b' } }).success, 'regions are coarse keys');
  t.notOk(jobSchema.safeParse({ ...createdJob, links: { ...createdJob.links, dashboard: 'javascript:alert(1)' } }).success);
  t.notOk(jobSchema.safeParse({ ...completedJob, assignment: { ...completedJob.assignment, startedAt: '2026-10-01 12:00' } }).success, 'times are ISO UTC');
  t.notOk(jobSchema.safeParse({ ...completedJob, assignment: { ...completedJob.assignment, startedAt: '2026-10-01T14:00:00+02:00' } }).success, 'times are UTC');
  t.notOk(fundConfirmRequestSchema.safeParse({ txHash: hex('f', 63) }).success);
  t.notOk(fundConfirmRequestSchema.safeParse({ txHash: hex('f', 64), customer: WALLET }).success);
  t.notOk(logListSchema.safeParse({ object: 'list', jobStatus: 'RUNNING', nextCursor: null, data: [] }).success, 'the log cursor is never null');
  t.notOk(logListSchema.safeParse({ object: 'list', jobStatus: 'RUNNING', nextCursor: '007', data: [] }).success);
  t.notOk(
    jobCreatedSchema.safeParse({
      object: 'job.created', job: createdJob, estimate: { lowMicroUsd: 0, highMicroUsd: 0, assumptions: [], matchedClasses: [] },
      policy: { verdict: 'allowed', findings: [] }, funding: null, fundingUnavailable: null, defaults: [], idempotentReplay: false,
    }).success,
    'funding or the reason it is unavailable',
  );
});

t.test('args: listEnvelopeSchema', async (t) => {
  const schema = listEnvelopeSchema(jobSchema);
  t.ok(schema.safeParse({ object: 'list', data: [], nextCursor: null }).success);
  t.notOk(schema.safeParse({ object: 'list', data: [] }).success, 'nextCursor is required');
  t.notOk(schema.safeParse({ object: 'page', data: [], nextCursor: null }).success);
  t.notOk(schema.safeParse({ object: 'list', data: [{ object: 'job' }], nextCursor: null }).success, 'items are checked');
});

t.test('isTerminalStatus', async (t) => {
  const terminal = JOB_STATUSES.filter(isTerminalStatus);
  t.same(terminal, ['COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELED', 'EXPIRED']);
  t.same(JOB_STATUSES, ['CREATED', 'FUNDED', 'QUEUED', 'MATCHING', 'RUNNING', 'COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELED', 'EXPIRED']);
});

t.test('field paths and details', async (t) => {
  t.equal(formatFieldPath(['outputRules', 0, 'path']), 'outputRules[0].path');
  t.equal(formatFieldPath(['env', 'AWS_SECRET']), 'env.AWS_SECRET');
  t.equal(formatFieldPath(['env', 'MY-VAR']), 'env["MY-VAR"]');
  t.equal(formatFieldPath([]), 'body');
  const r = fundConfirmRequestSchema.safeParse({ txHash: 5, extra: 1, more: 2 });
  t.notOk(r.success);
  if (!r.success) {
    t.same(issuesToDetails(r.error.issues), [
      { field: 'txHash', message: 'txHash must be a transaction hash: 0x followed by 64 hex digits' },
      { field: 'extra', message: 'extra is not a known field' },
      { field: 'more', message: 'more is not a known field' },
    ]);
  }
  const missing = fundConfirmRequestSchema.safeParse({});
  t.same(missing.success ? [] : issuesToDetails(missing.error.issues), [{ field: 'txHash', message: 'txHash is required' }]);
  t.equal(utf8ByteLength('aé€😀'), 1 + 2 + 3 + 4);
  t.equal(utf8ByteLength('\uD800'), 3, 'a lone surrogate counts as the replacement character');
  t.equal(utf8ByteLength('😀'.repeat(3)), new TextEncoder().encode('😀'.repeat(3)).length);
});
