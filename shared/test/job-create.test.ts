import t, { type Test } from 'tap';
import { errorDetailSchema } from '../src/errors.js';
import {
  effectiveImageDigest,
  isDnsName,
  isOutputPath,
  jobCreateRequestSchema,
  looksLikeSecretEnvName,
  maxPriceMicroUsdOf,
  parseImageReference,
  parseJobCreateRequest,
  requestedVramBytes,
} from '../src/schemas/job-create.js';

const MINIMAL = { image: 'busybox', gpu: { count: 1 } };
const DIGEST_A = `sha256:${'a'.repeat(64)}`;
const DIGEST_B = `sha256:${'b'.repeat(64)}`;
const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** The minimal body with `patch` merged on top (a key set to undefined is removed). */
function body(patch: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...MINIMAL, ...patch };
  for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key];
  return out;
}

/** Asserts the body fails with exactly one detail, on `field`, whose message starts with the field path. */
function rejectsOnly(t: Test, input: unknown, field: string, message?: RegExp): void {
  const r = parseJobCreateRequest(input);
  t.equal(r.ok, false, `${field}: refused`);
  if (r.ok) return;
  t.same(
    r.details.map((d) => d.field),
    [field],
    `${field}: exactly one detail (got ${JSON.stringify(r.details)})`,
  );
  const detail = r.details[0];
  if (!detail) return;
  t.ok(detail.message.startsWith(`${field} `), `message names the field: ${detail.message}`);
  if (message) t.match(detail.message, message);
  t.ok(errorDetailSchema.safeParse(detail).success, 'detail has the error-detail shape');
  t.notOk(jobCreateRequestSchema.safeParse(input).success, 'the schema agrees');
}

function accepts(t: Test, input: unknown, label = 'accepted'): void {
  const r = parseJobCreateRequest(input);
  t.same(r.ok ? [] : r.details, [], label);
  t.ok(jobCreateRequestSchema.safeParse(input).success, `${label} (schema agrees)`);
}

t.test('default: the minimal body passes unchanged', async (t) => {
  const r = parseJobCreateRequest({ image: 'busybox', gpu: { count: 1 } });
  t.same(r, { ok: true, value: { image: 'busybox', gpu: { count: 1 } } });
});

t.test('default: a full valid body passes', async (t) => {
  accepts(t, {
    image: '127.0.0.1:5000/gpufarm/canary:1.0@' + DIGEST_A,
    imageDigest: DIGEST_A,
    command: ['sha256-chain', '1000'],
    gpu: { count: 2, minimumVramGb: 23.5, modelAllowlist: ['rtx-4090-24gb', 'a100-80gb'] },
    workloadType: 'batch',
    maxRuntimeSeconds: 7200,
    maxPricePerGpuHour: '2.5',
    estRuntime: { minSeconds: 600, maxSeconds: 7200 },
    paymentToken: 'stable',
    env: { BATCH_SIZE: '32', MONKEY_COUNT: '3', _flag: '' },
    networkPolicy: { mode: 'allowlist', allow: ['huggingface.co', 'cdn-lfs.huggingface.co'] },
    inputs: [{ artifactId: 'art_01J9Z', mountName: 'weights.bin' }],
    outputRules: [{ path: '/output', maxBytes: GiB }, { path: '/output/checkpoints', maxBytes: 5 * GiB }],
    regionPreference: 'europe-west',
    deterministic: true,
    cpuCores: 8,
    ramBytes: 32 * GiB,
    title: 'Nightly batch',
  });
});

t.test('error: a body that is not a JSON object', async (t) => {
  for (const input of [null, undefined, [], [MINIMAL], 'busybox', 5, true]) {
    t.same(parseJobCreateRequest(input), { ok: false, details: [{ field: 'body', message: 'body must be a JSON object' }] }, `${JSON.stringify(input)}`);
  }
});

t.test('behavior: five independent violations give five details', async (t) => {
  const r = parseJobCreateRequest({
    image: 'Not A Valid/Image',
    gpu: { count: 17 },
    maxRuntimeSeconds: 10,
    env: { OPENAI_API_KEY: 'sk-…' },
    surprise: true,
  });
  t.equal(r.ok, false);
  if (r.ok) return;
  t.equal(r.details.length, 5);
  t.same(r.details.map((d) => d.field).sort(), ['env.OPENAI_API_KEY', 'gpu.count', 'image', 'maxRuntimeSeconds', 'surprise']);
  for (const d of r.details) t.ok(d.message.startsWith(`${d.field} `), d.message);
});

t.test('behavior: cross-field rules still run when other fields fail', async (t) => {
  const r = parseJobCreateRequest({
    image: `busybox@${DIGEST_A}`,
    imageDigest: DIGEST_B,
    gpu: { count: 0, minimumVramGb: 8, minimumVramBytes: 8 * GiB },
    maxPricePerGpuHour: 2,
    maxPricePerGpuHourMicroUsd: 2_000_000,
    estRuntime: { minSeconds: 100, maxSeconds: 50 },
  });
  t.equal(r.ok, false);
  if (r.ok) return;
  t.same(r.details.map((d) => d.field).sort(), [
    'estRuntime.minSeconds',
    'gpu.count',
    'gpu.minimumVramBytes',
    'imageDigest',
    'maxPricePerGpuHourMicroUsd',
  ]);
});

t.test('image', async (t) => {
  t.test('error: missing', async (t) => rejectsOnly(t, { gpu: { count: 1 } }, 'image', /^image is required$/));
  const bad = [
    '',
    'Busybox',
    'busybox:',
    'busybox:-tag',
    'busybox:tag with space',
    `busybox:${'a'.repeat(129)}`,
    'busybox@sha256:abc',
    `busybox@sha256:${'A'.repeat(64)}`,
    `busybox@sha512:${'a'.repeat(128)}`,
    'a//b',
    '/busybox',
    'busybox/',
    'org/-app',
    'org/app-',
    'a___b',
    'a..b',
    'http://registry/app',
    ' busybox',
    'busybox ',
    'registry:port/app',
    `${'a'.repeat(256)}`,
    ['busybox'],
    42,
  ];
  for (const image of bad) {
    t.test(`error: ${JSON.stringify(image).slice(0, 60)}`, async (t) => rejectsOnly(t, body({ image }), 'image'));
  }
  const good = [
    'busybox',
    'busybox:1.36',
    'library/busybox:latest',
    'ghcr.io/org/app:v1.2.3',
    'docker.io/library/python:3.12-slim',
    'registry.example.com:443/team/project/app:2024.01_rc-1',
    'localhost:5000/app',
    '127.0.0.1:5000/gpufarm/canary',
    '[::1]:5000/gpufarm/canary:dev',
    'a__b/c-d/e.f/g--h',
    `busybox@${DIGEST_A}`,
    `ghcr.io/org/app:v1@${DIGEST_A}`,
    'MyRegistry/app',
    `${'a'.repeat(255)}`,
  ];
  for (const image of good) {
    t.test(`default: ${image.slice(0, 60)}`, async (t) => accepts(t, body({ image })));
  }
  t.test('args: parseImageReference splits name, tag and digest', async (t) => {
    t.same(parseImageReference(`127.0.0.1:5000/gpufarm/canary:1.0@${DIGEST_A}`), { name: '127.0.0.1:5000/gpufarm/canary', tag: '1.0', digest: DIGEST_A });
    t.same(parseImageReference('localhost:5000/app'), { name: 'localhost:5000/app', tag: null, digest: null });
    t.equal(parseImageReference('busybox:'), null);
  });
});

t.test('imageDigest', async (t) => {
  t.test('error: malformed', async (t) => {
    for (const imageDigest of ['a'.repeat(64), `sha256:${'a'.repeat(63)}`, `sha256:${'G'.repeat(64)}`, `SHA256:${'a'.repeat(64)}`, 5]) {
      rejectsOnly(t, body({ imageDigest }), 'imageDigest');
    }
  });
  t.test('error: differs from the digest pinned in image', async (t) =>
    rejectsOnly(t, body({ image: `busybox@${DIGEST_A}`, imageDigest: DIGEST_B }), 'imageDigest', /must equal the digest pinned in image/));
  t.test('default: equal to the pinned digest, or alone', async (t) => {
    accepts(t, body({ image: `busybox@${DIGEST_A}`, imageDigest: DIGEST_A }), 'equal');
    accepts(t, body({ image: 'busybox:1.36', imageDigest: DIGEST_B }), 'alone');
    t.equal(effectiveImageDigest({ image: 'busybox', imageDigest: DIGEST_B }), DIGEST_B);
    t.equal(effectiveImageDigest({ image: `busybox@${DIGEST_A}` }), DIGEST_A);
    t.equal(effectiveImageDigest({ image: 'busybox' }), null);
  });
});

t.test('command', async (t) => {
  t.test('default: omitted, empty, 128 arguments, exactly 32 KiB', async (t) => {
    accepts(t, body({ command: [] }), 'empty');
    accepts(t, body({ command: ['sh', '-c', 'echo "$1"', ''] }), 'empty argument after the first');
    accepts(t, body({ command: Array.from({ length: 128 }, (_, i) => `a${i}`) }), '128 args');
    accepts(t, body({ command: ['x'.repeat(16 * 1024), 'y'.repeat(16 * 1024)] }), '32768 bytes');
  });
  t.test('error: not an array', async (t) => rejectsOnly(t, body({ command: 'echo hi' }), 'command'));
  t.test('error: 129 arguments', async (t) =>
    rejectsOnly(t, body({ command: Array.from({ length: 129 }, () => 'a') }), 'command', /at most 128 arguments/));
  t.test('error: over 32 KiB in total', async (t) =>
    rejectsOnly(t, body({ command: ['x'.repeat(16 * 1024), 'y'.repeat(16 * 1024 + 1)] }), 'command', /32768 bytes/));
  t.test('error: bytes, not characters, are counted', async (t) =>
    rejectsOnly(t, body({ command: ['é'.repeat(16 * 1024 + 1)] }), 'command', /32768 bytes/));
  t.test('error: a non-string argument', async (t) => rejectsOnly(t, body({ command: ['echo', 5] }), 'command[1]'));
  t.test('error: a NUL character', async (t) => rejectsOnly(t, body({ command: ['echo', 'a\u0000b'] }), 'command[1]'));
  t.test('error: an empty executable', async (t) => rejectsOnly(t, body({ command: ['', 'x'] }), 'command[0]'));
});

t.test('gpu', async (t) => {
  t.test('error: missing or not an object', async (t) => {
    rejectsOnly(t, { image: 'busybox' }, 'gpu', /^gpu is required$/);
    rejectsOnly(t, body({ gpu: 1 }), 'gpu');
    rejectsOnly(t, body({ gpu: [] }), 'gpu');
  });
  t.test('error: count', async (t) => {
    for (const count of [0, 17, 1.5, '1', null, -1]) rejectsOnly(t, body({ gpu: { count } }), 'gpu.count', /^gpu\.count must be an integer from 1 to 16$/);
    rejectsOnly(t, body({ gpu: {} }), 'gpu.count', /required/);
  });
  t.test('default: count 16', async (t) => accepts(t, body({ gpu: { count: 16 } })));
  t.test('error: both VRAM fields', async (t) =>
    rejectsOnly(t, body({ gpu: { count: 1, minimumVramGb: 24, minimumVramBytes: 24 * GiB } }), 'gpu.minimumVramBytes', /cannot be combined/));
  t.test('error: VRAM values', async (t) => {
    rejectsOnly(t, body({ gpu: { count: 1, minimumVramGb: 0 } }), 'gpu.minimumVramGb');
    rejectsOnly(t, body({ gpu: { count: 1, minimumVramGb: '24' } }), 'gpu.minimumVramGb');
    rejectsOnly(t, body({ gpu: { count: 1, minimumVramGb: 1025 } }), 'gpu.minimumVramGb');
    rejectsOnly(t, body({ gpu: { count: 1, minimumVramBytes: 1.5 } }), 'gpu.minimumVramBytes');
    rejectsOnly(t, body({ gpu: { count: 1, minimumVramBytes: 0 } }), 'gpu.minimumVramBytes');
  });
  t.test('default: one VRAM field', async (t) => {
    accepts(t, body({ gpu: { count: 1, minimumVramGb: 23.5 } }));
    accepts(t, body({ gpu: { count: 1, minimumVramBytes: 24 * GiB } }));
    t.equal(requestedVramBytes({ minimumVramGb: 24 }), 24 * GiB, 'GB means GiB, like the catalog');
    t.equal(requestedVramBytes({ minimumVramGb: 0.1 }), Math.ceil(0.1 * GiB));
    t.equal(requestedVramBytes({ minimumVramBytes: 5 }), 5);
    t.equal(requestedVramBytes({}), null);
  });
  t.test('error: modelAllowlist', async (t) => {
    rejectsOnly(t, body({ gpu: { count: 1, modelAllowlist: [] } }), 'gpu.modelAllowlist');
    rejectsOnly(t, body({ gpu: { count: 1, modelAllowlist: 'rtx-4090-24gb' } }), 'gpu.modelAllowlist');
    rejectsOnly(t, body({ gpu: { count: 1, modelAllowlist: ['rtx-4090-24gb', 'rtx-9090'] } }), 'gpu.modelAllowlist[1]', /known GPU class id/);
    rejectsOnly(t, body({ gpu: { count: 1, modelAllowlist: ['RTX-4090-24GB'] } }), 'gpu.modelAllowlist[0]');
    rejectsOnly(t, body({ gpu: { count: 1, modelAllowlist: ['a100-80gb', 'l4-24gb', 'a100-80gb'] } }), 'gpu.modelAllowlist[2]', /repeats gpu\.modelAllowlist\[0\]/);
  });
  t.test('default: a known, unique allowlist', async (t) => accepts(t, body({ gpu: { count: 1, modelAllowlist: ['a100-80gb', 'l4-24gb'] } })));
  t.test('error: proven', async (t) => {
    rejectsOnly(t, body({ gpu: { count: 1, proven: 'true' } }), 'gpu.proven', /^gpu\.proven must be true or false$/);
    rejectsOnly(t, body({ gpu: { count: 1, proven: 1 } }), 'gpu.proven');
    rejectsOnly(t, body({ gpu: { count: 1, proven: null } }), 'gpu.proven');
  });
  t.test('default: proven true or false', async (t) => {
    accepts(t, body({ gpu: { count: 1, proven: true } }));
    accepts(t, body({ gpu: { count: 1, proven: false } }));
  });
  t.test('error: unknown gpu field', async (t) => rejectsOnly(t, body({ gpu: { count: 1, vram: 24 } }), 'gpu.vram', /^gpu\.vram is not a known field$/));
});

t.test('workloadType', async (t) => {
  rejectsOnly(t, body({ workloadType: 'mining' }), 'workloadType', /one of inference/);
  rejectsOnly(t, body({ workloadType: 'Batch' }), 'workloadType');
  accepts(t, body({ workloadType: 'fine_tuning' }));
});

t.test('maxRuntimeSeconds', async (t) => {
  for (const maxRuntimeSeconds of [59, 604_801, 60.5, '3600', 0]) {
    rejectsOnly(t, body({ maxRuntimeSeconds }), 'maxRuntimeSeconds', /from 60 to 604800/);
  }
  accepts(t, body({ maxRuntimeSeconds: 60 }));
  accepts(t, body({ maxRuntimeSeconds: 604_800 }));
});

t.test('maxPricePerGpuHour', async (t) => {
  t.test('error: refused amounts', async (t) => {
    const cases: [unknown, RegExp][] = [
      [0, /above 0/],
      ['0', /above 0/],
      ['0.000000', /above 0/],
      [1000.000001, /at most 1000 USD/],
      ['-1', /negative/],
      [-2, /negative/],
      [1e-7, /6 decimal places/],
      [0.1 + 0.2, /6 decimal places/],
      ['2.1234567', /6 decimal places/],
      ['1e-6', /plain decimal/],
      ['2,5', /plain decimal/],
      [true, /number or a decimal string/],
      [null, /number or a decimal string/],
    ];
    for (const [maxPricePerGpuHour, message] of cases) rejectsOnly(t, body({ maxPricePerGpuHour }), 'maxPricePerGpuHour', message);
  });
  t.test('default: accepted amounts convert exactly', async (t) => {
    for (const [maxPricePerGpuHour, expected] of [['2.5', 2_500_000], [2.675, 2_675_000], ['0.000001', 1], [1e-6, 1], [1000, 1_000_000_000]] as const) {
      accepts(t, body({ maxPricePerGpuHour }));
      t.equal(maxPriceMicroUsdOf({ maxPricePerGpuHour }), expected);
    }
    t.equal(maxPriceMicroUsdOf({}), null);
    t.equal(maxPriceMicroUsdOf({ maxPricePerGpuHourMicroUsd: 7 }), 7);
  });
  t.test('error: micro-USD form', async (t) => {
    for (const maxPricePerGpuHourMicroUsd of [0, 1.5, '2500000', 1_000_000_001]) {
      rejectsOnly(t, body({ maxPricePerGpuHourMicroUsd }), 'maxPricePerGpuHourMicroUsd');
    }
    accepts(t, body({ maxPricePerGpuHourMicroUsd: 2_500_000 }));
  });
  t.test('error: both forms', async (t) =>
    rejectsOnly(t, body({ maxPricePerGpuHour: '2.5', maxPricePerGpuHourMicroUsd: 2_500_000 }), 'maxPricePerGpuHourMicroUsd', /cannot be combined/));
});

t.test('estRuntime', async (t) => {
  t.test('error: min above max', async (t) =>
    rejectsOnly(t, body({ estRuntime: { minSeconds: 600, maxSeconds: 300 } }), 'estRuntime.minSeconds', /must not exceed estRuntime\.maxSeconds/));
  t.test('error: max above the default runtime limit', async (t) =>
    rejectsOnly(t, body({ estRuntime: { minSeconds: 60, maxSeconds: 3601 } }), 'estRuntime.maxSeconds', /default maxRuntimeSeconds \(3600\)/));
  t.test('error: max above an explicit runtime limit', async (t) =>
    rejectsOnly(t, body({ maxRuntimeSeconds: 600, estRuntime: { minSeconds: 60, maxSeconds: 601 } }), 'estRuntime.maxSeconds', /maxRuntimeSeconds \(600\)/));
  t.test('error: missing or malformed members', async (t) => {
    rejectsOnly(t, body({ estRuntime: { minSeconds: 60 } }), 'estRuntime.maxSeconds', /required/);
    rejectsOnly(t, body({ estRuntime: { minSeconds: -1, maxSeconds: 60 } }), 'estRuntime.minSeconds');
    rejectsOnly(t, body({ estRuntime: { minSeconds: 1, maxSeconds: 60, typical: 30 } }), 'estRuntime.typical');
    rejectsOnly(t, body({ estRuntime: 3600 }), 'estRuntime');
  });
  t.test('default: bounds are inclusive', async (t) => {
    accepts(t, body({ estRuntime: { minSeconds: 3600, maxSeconds: 3600 } }));
    accepts(t, body({ maxRuntimeSeconds: 7200, estRuntime: { minSeconds: 0, maxSeconds: 7200 } }));
  });
  t.test('behavior: an invalid runtime limit is reported once, not again through estRuntime', async (t) =>
    rejectsOnly(t, body({ maxRuntimeSeconds: 10, estRuntime: { minSeconds: 60, maxSeconds: 3000 } }), 'maxRuntimeSeconds'));
});

t.test('paymentToken', async (t) => {
  rejectsOnly(t, body({ paymentToken: 'usdc' }), 'paymentToken');
  accepts(t, body({ paymentToken: 'eth' }));
  accepts(t, body({ paymentToken: 'stable' }));
});

t.test('env', async (t) => {
  const entries = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`VAR_${i}`, 'x']));
  t.test('default: 32 variables and a 4096-byte value', async (t) => {
    accepts(t, body({ env: entries(32) }));
    accepts(t, body({ env: { BIG: 'x'.repeat(4096) } }));
    accepts(t, body({ env: {} }));
  });
  t.test('error: 33 variables', async (t) => rejectsOnly(t, body({ env: entries(33) }), 'env', /at most 32 variables/));
  t.test('error: not an object', async (t) => {
    rejectsOnly(t, body({ env: [] }), 'env');
    rejectsOnly(t, body({ env: 'A=1' }), 'env');
  });
  t.test('error: values', async (t) => {
    rejectsOnly(t, body({ env: { BIG: 'x'.repeat(4097) } }), 'env.BIG', /4096 bytes/);
    rejectsOnly(t, body({ env: { BIG: 'é'.repeat(2049) } }), 'env.BIG', /4096 bytes/);
    rejectsOnly(t, body({ env: { N: 5 } }), 'env.N');
    rejectsOnly(t, body({ env: { N: 'a\u0000' } }), 'env.N');
  });
  t.test('error: names that are not POSIX', async (t) => {
    rejectsOnly(t, body({ env: { '1ABC': 'x' } }), 'env["1ABC"]', /POSIX/);
    rejectsOnly(t, body({ env: { 'MY-VAR': 'x' } }), 'env["MY-VAR"]', /POSIX/);
    rejectsOnly(t, body({ env: { 'A.B': 'x' } }), 'env["A.B"]', /POSIX/);
    rejectsOnly(t, body({ env: { '': 'x' } }), 'env[""]', /POSIX/);
  });
  t.test('error: reserved names', async (t) => {
    rejectsOnly(t, body({ env: { GF_JOB_ID: 'x' } }), 'env.GF_JOB_ID', /reserved/);
    rejectsOnly(t, body({ env: { https_proxy: 'x' } }), 'env.https_proxy', /reserved/);
  });
  const secretNames = [
    'API_KEY', 'apiKey', 'OPENAI_API_KEY', 'MY_APIKEY', 'KEY', 'S3_KEY', 'KEY2', 'TOKEN', 'HF_TOKEN', 'GITHUB_TOKEN', 'authToken',
    'WALLET_SEED', 'SEED_PHRASE', 'walletSeed', 'DB_PASSWORD', 'PGPASSWORD', 'MYSQL_PWD', 'PASSWD', 'CLIENT_SECRET', 'SECRETS_FILE', 'PRIVATE_KEY_PEM',
    'GOOGLE_APPLICATION_CREDENTIALS', 'AWS_CREDENTIALS_FILE', 'WALLET_MNEMONIC', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY',
    'AWS_SESSION_TOKEN', 'AZURE_CLIENT_SECRET', 'HUGGING_FACE_HUB_TOKEN', 'DATABASE_URL', 'GITHUB_PAT', 'aws_secret',
  ];
  for (const name of secretNames) {
    t.test(`error: ${name} looks like a secret`, async (t) => {
      t.ok(looksLikeSecretEnvName(name));
      rejectsOnly(t, body({ env: { [name]: 'x' } }), `env.${name}`, /looks like a secret/);
    });
  }
  const harmless = ['MONKEY_COUNT', 'KEYBOARD_LAYOUT', 'TOKENIZER_PATH', 'MAX_TOKENS', 'TURKEY', 'BATCH_SIZE', 'PATH', 'PWD', 'RENDER_PASS', 'SEEDLING_RATE', 'SEED', 'RANDOM_SEED', 'PYTHONHASHSEED', 'TORCH_SEED'];
  for (const name of harmless) {
    t.test(`default: ${name} is not a secret name`, async (t) => {
      t.notOk(looksLikeSecretEnvName(name));
      accepts(t, body({ env: { [name]: 'x' } }));
    });
  }
});

t.test('networkPolicy', async (t) => {
  t.test('default: none and a valid allowlist', async (t) => {
    accepts(t, body({ networkPolicy: { mode: 'none' } }));
    accepts(t, body({ networkPolicy: { mode: 'allowlist', allow: ['huggingface.co', 'xn--bcher-kva.example', 'A.B.Example.COM', '1password.com'] } }));
    accepts(t, body({ networkPolicy: { mode: 'allowlist', allow: Array.from({ length: 32 }, (_, i) => `h${i}.example.com`) } }));
  });
  t.test('error: mode', async (t) => {
    rejectsOnly(t, body({ networkPolicy: { mode: 'open' } }), 'networkPolicy.mode', /"none" or "allowlist"/);
    rejectsOnly(t, body({ networkPolicy: { allow: ['example.com'] } }), 'networkPolicy.mode');
    rejectsOnly(t, body({ networkPolicy: 'none' }), 'networkPolicy');
  });
  t.test('error: allow list size', async (t) => {
    rejectsOnly(t, body({ networkPolicy: { mode: 'allowlist', allow: [] } }), 'networkPolicy.allow');
    rejectsOnly(t, body({ networkPolicy: { mode: 'allowlist' } }), 'networkPolicy.allow', /required/);
    rejectsOnly(t, body({ networkPolicy: { mode: 'allowlist', allow: Array.from({ length: 33 }, (_, i) => `h${i}.example.com`) } }), 'networkPolicy.allow');
  });
  t.test('error: allow with mode none', async (t) =>
    rejectsOnly(t, body({ networkPolicy: { mode: 'none', allow: ['example.com'] } }), 'networkPolicy.allow', /is not a known field/));
  for (const name of ['http://example.com', 'example.com:443', 'example.com/path', '*.example.com', 'localhost', '10.0.0.1', 'a..com', '-a.com', 'a-.com', 'example.com.', 'ex_ample.com', 'bücher.example', `${'a'.repeat(64)}.com`, '', 5]) {
    t.test(`error: allow entry ${JSON.stringify(name)}`, async (t) => {
      rejectsOnly(t, body({ networkPolicy: { mode: 'allowlist', allow: ['ok.example.com', name] } }), 'networkPolicy.allow[1]');
      if (typeof name === 'string') t.notOk(isDnsName(name));
    });
  }
  t.ok(isDnsName(`${'a'.repeat(63)}.com`));
});

t.test('inputs', async (t) => {
  t.test('default: unique mounts', async (t) =>
    accepts(t, body({ inputs: [{ artifactId: 'art_1', mountName: 'data' }, { artifactId: 'art_1', mountName: 'data.v2_copy-1' }] })));
  for (const mountName of ['.', '..', '.hidden', 'a/b', '-x', '', 'a'.repeat(65), 'a b']) {
    t.test(`error: mountName ${JSON.stringify(mountName)}`, async (t) =>
      rejectsOnly(t, body({ inputs: [{ artifactId: 'art_1', mountName }] }), 'inputs[0].mountName'));
  }
  t.test('default: a 64-character mount name', async (t) => accepts(t, body({ inputs: [{ artifactId: 'a', mountName: 'm'.repeat(64) }] })));
  t.test('error: duplicate mount names', async (t) =>
    rejectsOnly(t, body({ inputs: [{ artifactId: 'a', mountName: 'data' }, { artifactId: 'b', mountName: 'data' }] }), 'inputs[1].mountName', /repeats inputs\[0\]\.mountName/));
  t.test('error: artifactId and unknown item fields', async (t) => {
    rejectsOnly(t, body({ inputs: [{ mountName: 'data' }] }), 'inputs[0].artifactId', /required/);
    rejectsOnly(t, body({ inputs: [{ artifactId: '../x', mountName: 'data' }] }), 'inputs[0].artifactId');
    rejectsOnly(t, body({ inputs: [{ artifactId: 'a', mountName: 'data', readOnly: false }] }), 'inputs[0].readOnly', /is not a known field/);
    rejectsOnly(t, body({ inputs: {} }), 'inputs');
  });
});

t.test('outputRules', async (t) => {
  t.test('default: paths under /output and the 5 GiB cap', async (t) => {
    accepts(t, body({ outputRules: [{ path: '/output', maxBytes: 5 * GiB }] }));
    accepts(t, body({ outputRules: [{ path: '/output/a/b.txt', maxBytes: 1 }, { path: '/output/..x', maxBytes: 1 }] }));
    accepts(t, body({ outputRules: Array.from({ length: 8 }, (_, i) => ({ path: `/output/r${i}`, maxBytes: 1 })) }));
  });
  t.test('error: count', async (t) => {
    rejectsOnly(t, body({ outputRules: [] }), 'outputRules', /1 to 8/);
    rejectsOnly(t, body({ outputRules: Array.from({ length: 9 }, (_, i) => ({ path: `/output/r${i}`, maxBytes: 1 })) }), 'outputRules', /1 to 8/);
  });
  for (const path of ['/output/../etc/passwd', '/output//a', '/output/', '/output/./a', '/output/a/..', '/outputs', 'output', '/tmp', '/', '/output/a b', '/OUTPUT', 5]) {
    t.test(`error: path ${JSON.stringify(path)}`, async (t) => {
      rejectsOnly(t, body({ outputRules: [{ path, maxBytes: 1 }] }), 'outputRules[0].path');
      if (typeof path === 'string') t.notOk(isOutputPath(path));
    });
  }
  t.test('error: maxBytes', async (t) => {
    for (const maxBytes of [0, 5 * GiB + 1, 1.5, '1']) rejectsOnly(t, body({ outputRules: [{ path: '/output', maxBytes }] }), 'outputRules[0].maxBytes');
  });
  t.test('error: the same path twice', async (t) =>
    rejectsOnly(t, body({ outputRules: [{ path: '/output', maxBytes: 1 }, { path: '/output', maxBytes: 2 }] }), 'outputRules[1].path', /repeats/));
});

t.test('regionPreference', async (t) => {
  accepts(t, body({ regionPreference: 'europe-west' }));
  rejectsOnly(t, body({ regionPreference: 'mars' }), 'regionPreference', /known region key/);
  rejectsOnly(t, body({ regionPreference: 'Europe' }), 'regionPreference', /known region key/);
});

t.test('deterministic, cpuCores, ramBytes', async (t) => {
  accepts(t, body({ deterministic: false, cpuCores: 1, ramBytes: 256 * MiB }));
  accepts(t, body({ cpuCores: 256, ramBytes: 2 * 1024 * GiB }));
  rejectsOnly(t, body({ deterministic: 'yes' }), 'deterministic');
  for (const cpuCores of [0, 257, 1.5]) rejectsOnly(t, body({ cpuCores }), 'cpuCores', /from 1 to 256/);
  for (const ramBytes of [256 * MiB - 1, 2 * 1024 * GiB + 1, '1G']) rejectsOnly(t, body({ ramBytes }), 'ramBytes');
});

t.test('title', async (t) => {
  accepts(t, body({ title: 'x'.repeat(120) }));
  accepts(t, body({ title: '🚀'.repeat(120) }), '120 characters of 2 UTF-16 units each');
  rejectsOnly(t, body({ title: 'x'.repeat(121) }), 'title', /at most 120 characters/);
  rejectsOnly(t, body({ title: 42 }), 'title');
  rejectsOnly(t, body({ title: 'a\u0000b' }), 'title');
});

t.test('unknown fields', async (t) => {
  rejectsOnly(t, body({ gpus: 2 }), 'gpus', /^gpus is not a known field$/);
  rejectsOnly(t, body({ 'x-y': 1 }), '["x-y"]', /is not a known field/);
  rejectsOnly(t, JSON.parse('{"image":"busybox","gpu":{"count":1},"__proto__":{"polluted":true}}'), '__proto__', /is not a known field/);
  const r = parseJobCreateRequest(body({ a: 1, b: 2 }));
  t.same(r.ok ? [] : r.details, [
    { field: 'a', message: 'a is not a known field' },
    { field: 'b', message: 'b is not a known field' },
  ], 'one entry per unknown field');
});
