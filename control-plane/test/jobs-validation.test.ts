import { errorEnvelopeSchema, JOB_SPEC_LIMITS, jobCreatedSchema } from '@gpufarm/shared';
import type { LightMyRequestResponse } from 'fastify';
import t, { type Test } from 'tap';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { bearer, buildTestApp, createTestKey, type TestApp } from './helpers/app.js';
import { assertError } from './helpers/assert.js';

/**
 * `POST /v1/jobs` through HTTP: every field rule of the creation spec, each broken alone on a
 * valid body, must answer 422 `validation_error` with exactly one detail naming that field.
 * The rules themselves are unit-tested in `shared/test/job-create.test.ts`; this file checks
 * that the route reports them faithfully (one entry per field, the path in the message).
 */

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;
const DIGEST_A = `sha256:${'a'.repeat(64)}`;
const DIGEST_B = `sha256:${'b'.repeat(64)}`;
const STABLE_TOKEN = `0x${'ab'.repeat(20)}`;

/** A valid body that sets every field the route accepts without an uploaded artifact. */
const BASE = {
  image: 'ghcr.io/acme/trainer:1.4',
  command: ['python', 'train.py', '--epochs', '3'],
  gpu: { count: 2, minimumVramGb: 24, modelAllowlist: ['rtx-4090-24gb', 'h100-80gb-sxm'] },
  workloadType: 'batch',
  maxRuntimeSeconds: 7200,
  maxPricePerGpuHour: '5.00',
  estRuntime: { minSeconds: 600, maxSeconds: 3600 },
  paymentToken: 'stable',
  env: { BATCH_SIZE: '32', MODEL_NAME: 'resnet50' },
  networkPolicy: { mode: 'allowlist', allow: ['huggingface.co'] },
  outputRules: [
    { path: '/output', maxBytes: GiB },
    { path: '/output/checkpoints', maxBytes: 2 * GiB },
  ],
  regionPreference: 'europe-west',
  deterministic: false,
  cpuCores: 8,
  ramBytes: 32 * GiB,
  title: 'Nightly fine-tune',
} as const;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** Dotted paths into BASE (`gpu.count`, `outputRules.0.path`) and the value to put there; `undefined` removes it. */
type Patch = Record<string, Json | undefined>;

/** A deep copy of BASE with `patch` applied. */
function body(patch: Patch = {}): Record<string, Json> {
  const out = structuredClone(BASE) as unknown as Record<string, Json>;
  for (const [path, value] of Object.entries(patch)) {
    const keys = path.split('.');
    const last = keys.pop()!;
    let node = out as Record<string, Json>;
    for (const key of keys) node = node[key] as Record<string, Json>;
    if (value === undefined) delete node[last];
    else node[last] = value;
  }
  return out;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const env = (extra: Record<string, Json>) => ({ ...BASE.env, ...extra });

/** Each case breaks exactly one rule of the spec; `field` is the one detail expected. */
const CASES: ReadonlyArray<readonly [rule: string, patch: Patch, field: string]> = [
  // image: a valid reference, the digest forms and their consistency
  ['image missing', { image: undefined }, 'image'],
  ['image not a string', { image: 42 }, 'image'],
  ['image with upper-case path', { image: 'acme/Trainer:1.4' }, 'image'],
  ['image with a scheme', { image: 'https://ghcr.io/acme/trainer' }, 'image'],
  ['image with an empty tag', { image: 'busybox:' }, 'image'],
  ['image with a space', { image: 'busybox :1' }, 'image'],
  ['image name over 255 characters', { image: 'a'.repeat(256) }, 'image'],
  ['image digest too short', { image: 'busybox@sha256:abc' }, 'image'],
  ['image digest in upper case', { image: `busybox@sha256:${'A'.repeat(64)}` }, 'image'],
  ['image digest not sha256', { image: `busybox@sha512:${'a'.repeat(128)}` }, 'image'],
  ['imageDigest without the sha256: prefix', { imageDigest: 'a'.repeat(64) }, 'imageDigest'],
  ['imageDigest of 63 hex digits', { imageDigest: `sha256:${'a'.repeat(63)}` }, 'imageDigest'],
  ['imageDigest not a string', { imageDigest: 5 }, 'imageDigest'],
  ['imageDigest differs from the digest pinned in image', { image: `ghcr.io/acme/trainer:1.4@${DIGEST_A}`, imageDigest: DIGEST_B }, 'imageDigest'],
  // command: argv, at most 128 arguments and 32 KiB
  ['command not an array', { command: 'python train.py' }, 'command'],
  ['command of 129 arguments', { command: range(129).map((i) => `a${i}`) }, 'command'],
  ['command over 32 KiB in total', { command: ['x'.repeat(16 * KiB), 'y'.repeat(16 * KiB + 1)] }, 'command'],
  ['command over 32 KiB of UTF-8 bytes', { command: ['é'.repeat(16 * KiB + 1)] }, 'command'],
  ['command with a non-string argument', { command: ['python', 3] }, 'command[1]'],
  ['command with an empty executable', { command: ['', 'train.py'] }, 'command[0]'],
  ['command with a NUL character', { command: ['python', 'a\u0000b'] }, 'command[1]'],
  // gpu
  ['gpu missing', { gpu: undefined }, 'gpu'],
  ['gpu not an object', { gpu: 2 }, 'gpu'],
  ['gpu an array', { gpu: [{ count: 1 }] }, 'gpu'],
  ['gpu.count missing', { 'gpu.count': undefined }, 'gpu.count'],
  ['gpu.count 0', { 'gpu.count': 0 }, 'gpu.count'],
  ['gpu.count 17', { 'gpu.count': 17 }, 'gpu.count'],
  ['gpu.count negative', { 'gpu.count': -1 }, 'gpu.count'],
  ['gpu.count fractional', { 'gpu.count': 1.5 }, 'gpu.count'],
  ['gpu.count a string', { 'gpu.count': '2' }, 'gpu.count'],
  ['gpu.minimumVramGb 0', { 'gpu.minimumVramGb': 0 }, 'gpu.minimumVramGb'],
  ['gpu.minimumVramGb a string', { 'gpu.minimumVramGb': '24' }, 'gpu.minimumVramGb'],
  ['gpu.minimumVramGb over 1024', { 'gpu.minimumVramGb': 1025 }, 'gpu.minimumVramGb'],
  ['gpu.minimumVramBytes 0', { 'gpu.minimumVramGb': undefined, 'gpu.minimumVramBytes': 0 }, 'gpu.minimumVramBytes'],
  ['gpu.minimumVramBytes fractional', { 'gpu.minimumVramGb': undefined, 'gpu.minimumVramBytes': 1.5 }, 'gpu.minimumVramBytes'],
  ['gpu.minimumVramBytes a string', { 'gpu.minimumVramGb': undefined, 'gpu.minimumVramBytes': '24GiB' }, 'gpu.minimumVramBytes'],
  ['gpu.minimumVramGb and gpu.minimumVramBytes both given', { 'gpu.minimumVramBytes': 24 * GiB }, 'gpu.minimumVramBytes'],
  ['gpu.modelAllowlist with an unknown class', { 'gpu.modelAllowlist': ['rtx-4090-24gb', 'rtx-9090'] }, 'gpu.modelAllowlist[1]'],
  ['gpu.modelAllowlist with a class in the wrong case', { 'gpu.modelAllowlist': ['RTX-4090-24GB'] }, 'gpu.modelAllowlist[0]'],
  ['gpu.modelAllowlist empty', { 'gpu.modelAllowlist': [] }, 'gpu.modelAllowlist'],
  ['gpu.modelAllowlist a string', { 'gpu.modelAllowlist': 'rtx-4090-24gb' }, 'gpu.modelAllowlist'],
  ['gpu.modelAllowlist with a duplicate', { 'gpu.modelAllowlist': ['rtx-4090-24gb', 'h100-80gb-sxm', 'rtx-4090-24gb'] }, 'gpu.modelAllowlist[2]'],
  // workloadType
  ['workloadType not in the enum', { workloadType: 'mining' }, 'workloadType'],
  ['workloadType in the wrong case', { workloadType: 'Batch' }, 'workloadType'],
  ['workloadType not a string', { workloadType: 1 }, 'workloadType'],
  // maxRuntimeSeconds
  ['maxRuntimeSeconds 59', { maxRuntimeSeconds: 59 }, 'maxRuntimeSeconds'],
  ['maxRuntimeSeconds 604801', { maxRuntimeSeconds: 604_801 }, 'maxRuntimeSeconds'],
  ['maxRuntimeSeconds fractional', { maxRuntimeSeconds: 3600.5 }, 'maxRuntimeSeconds'],
  ['maxRuntimeSeconds a string', { maxRuntimeSeconds: '7200' }, 'maxRuntimeSeconds'],
  ['maxRuntimeSeconds null', { maxRuntimeSeconds: null }, 'maxRuntimeSeconds'],
  // maxPricePerGpuHour and maxPricePerGpuHourMicroUsd
  ['maxPricePerGpuHour 0', { maxPricePerGpuHour: 0 }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour negative string', { maxPricePerGpuHour: '-1' }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour negative number', { maxPricePerGpuHour: -2 }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour string with 7 decimals', { maxPricePerGpuHour: '2.1234567' }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour number with 7 decimals', { maxPricePerGpuHour: 2.1234567 }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour in exponent notation', { maxPricePerGpuHour: '1e-6' }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour with a decimal comma', { maxPricePerGpuHour: '2,5' }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour NaN as a string', { maxPricePerGpuHour: 'NaN' }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour above 1000', { maxPricePerGpuHour: 1000.000001 }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHour a boolean', { maxPricePerGpuHour: true }, 'maxPricePerGpuHour'],
  ['maxPricePerGpuHourMicroUsd fractional', { maxPricePerGpuHour: undefined, maxPricePerGpuHourMicroUsd: 2_500_000.5 }, 'maxPricePerGpuHourMicroUsd'],
  ['maxPricePerGpuHourMicroUsd 0', { maxPricePerGpuHour: undefined, maxPricePerGpuHourMicroUsd: 0 }, 'maxPricePerGpuHourMicroUsd'],
  ['maxPricePerGpuHourMicroUsd a string', { maxPricePerGpuHour: undefined, maxPricePerGpuHourMicroUsd: '2500000' }, 'maxPricePerGpuHourMicroUsd'],
  ['maxPricePerGpuHourMicroUsd above the cap', { maxPricePerGpuHour: undefined, maxPricePerGpuHourMicroUsd: JOB_SPEC_LIMITS.maxPricePerGpuHourMicroUsdMax + 1 }, 'maxPricePerGpuHourMicroUsd'],
  ['both price fields', { maxPricePerGpuHourMicroUsd: 5_000_000 }, 'maxPricePerGpuHourMicroUsd'],
  // estRuntime
  ['estRuntime.minSeconds above estRuntime.maxSeconds', { estRuntime: { minSeconds: 3600, maxSeconds: 600 } }, 'estRuntime.minSeconds'],
  ['estRuntime.maxSeconds above maxRuntimeSeconds', { estRuntime: { minSeconds: 600, maxSeconds: 7201 } }, 'estRuntime.maxSeconds'],
  ['estRuntime.maxSeconds above the default maxRuntimeSeconds', { maxRuntimeSeconds: undefined, estRuntime: { minSeconds: 600, maxSeconds: 3601 } }, 'estRuntime.maxSeconds'],
  ['estRuntime.maxSeconds missing', { 'estRuntime.maxSeconds': undefined }, 'estRuntime.maxSeconds'],
  ['estRuntime.minSeconds negative', { 'estRuntime.minSeconds': -1 }, 'estRuntime.minSeconds'],
  ['estRuntime.minSeconds a string', { 'estRuntime.minSeconds': '600' }, 'estRuntime.minSeconds'],
  ['estRuntime not an object', { estRuntime: 3600 }, 'estRuntime'],
  // paymentToken
  ['paymentToken not in the enum', { paymentToken: 'usdc' }, 'paymentToken'],
  ['paymentToken in the wrong case', { paymentToken: 'ETH' }, 'paymentToken'],
  ['paymentToken not a string', { paymentToken: 1 }, 'paymentToken'],
  // env
  ['env of 33 variables', { env: env(Object.fromEntries(range(31).map((i) => [`VAR_${i}`, 'x']))) }, 'env'],
  ['env not an object', { env: ['BATCH_SIZE=32'] }, 'env'],
  ['env name starting with a digit', { env: env({ '1ABC': 'x' }) }, 'env["1ABC"]'],
  ['env name with a hyphen', { env: env({ 'MY-VAR': 'x' }) }, 'env["MY-VAR"]'],
  ['env name with a dot', { env: env({ 'A.B': 'x' }) }, 'env["A.B"]'],
  ['env name empty', { env: env({ '': 'x' }) }, 'env[""]'],
  ['env name reserved by the platform', { env: env({ GF_JOB_ID: 'x' }) }, 'env.GF_JOB_ID'],
  ['env proxy variable', { env: env({ HTTPS_PROXY: 'http://proxy.example.com' }) }, 'env.HTTPS_PROXY'],
  ['env value not a string', { env: env({ EPOCHS: 3 }) }, 'env.EPOCHS'],
  ['env value over 4 KiB', { env: env({ PROMPT: 'x'.repeat(4 * KiB + 1) }) }, 'env.PROMPT'],
  ...[
    'API_KEY', 'apiKey', 'OPENAI_API_KEY', 'HF_TOKEN', 'GITHUB_TOKEN', 'authToken', 'SECRET', 'CLIENT_SECRET', 'DB_PASSWORD', 'PASSWD',
    'PRIVATE_KEY_PEM', 'AWS_CREDENTIALS_FILE', 'WALLET_MNEMONIC', 'WALLET_SEED', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY',
    'AWS_SESSION_TOKEN', 'GOOGLE_APPLICATION_CREDENTIALS', 'AZURE_CLIENT_SECRET', 'DATABASE_URL', 'PGPASSWORD',
  ].map((name) => [`env name ${name} looks like a secret`, { env: env({ [name]: 'x' }) }, `env.${name}`] as const),
  // networkPolicy
  ['networkPolicy.mode not in the enum', { 'networkPolicy.mode': 'open' }, 'networkPolicy.mode'],
  ['networkPolicy.mode missing', { 'networkPolicy.mode': undefined }, 'networkPolicy.mode'],
  ['networkPolicy not an object', { networkPolicy: 'none' }, 'networkPolicy'],
  ['networkPolicy.allow missing', { 'networkPolicy.allow': undefined }, 'networkPolicy.allow'],
  ['networkPolicy.allow empty', { 'networkPolicy.allow': [] }, 'networkPolicy.allow'],
  ['networkPolicy.allow of 33 names', { 'networkPolicy.allow': range(33).map((i) => `h${i}.example.com`) }, 'networkPolicy.allow'],
  ['networkPolicy.allow with mode none', { 'networkPolicy.mode': 'none' }, 'networkPolicy.allow'],
  ['networkPolicy.allow entry with a scheme', { 'networkPolicy.allow': ['huggingface.co', 'https://example.com'] }, 'networkPolicy.allow[1]'],
  ['networkPolicy.allow entry with a port', { 'networkPolicy.allow': ['huggingface.co', 'example.com:443'] }, 'networkPolicy.allow[1]'],
  ['networkPolicy.allow entry with a path', { 'networkPolicy.allow': ['huggingface.co', 'example.com/x'] }, 'networkPolicy.allow[1]'],
  ['networkPolicy.allow wildcard entry', { 'networkPolicy.allow': ['huggingface.co', '*.example.com'] }, 'networkPolicy.allow[1]'],
  ['networkPolicy.allow entry with a trailing dot', { 'networkPolicy.allow': ['huggingface.co', 'example.com.'] }, 'networkPolicy.allow[1]'],
  ['networkPolicy.allow IP literal', { 'networkPolicy.allow': ['huggingface.co', '10.0.0.1'] }, 'networkPolicy.allow[1]'],
  ['networkPolicy.allow entry not a string', { 'networkPolicy.allow': ['huggingface.co', 5] }, 'networkPolicy.allow[1]'],
  // inputs (the artifact check needs a valid body, so these fail before it)
  ['inputs mountName ".."', { inputs: [{ artifactId: 'art_1', mountName: '..' }] }, 'inputs[0].mountName'],
  ['inputs mountName hidden', { inputs: [{ artifactId: 'art_1', mountName: '.hidden' }] }, 'inputs[0].mountName'],
  ['inputs mountName with a slash', { inputs: [{ artifactId: 'art_1', mountName: 'a/b' }] }, 'inputs[0].mountName'],
  ['inputs mountName empty', { inputs: [{ artifactId: 'art_1', mountName: '' }] }, 'inputs[0].mountName'],
  ['inputs mountName of 65 characters', { inputs: [{ artifactId: 'art_1', mountName: 'm'.repeat(65) }] }, 'inputs[0].mountName'],
  ['inputs mountName missing', { inputs: [{ artifactId: 'art_1' }] }, 'inputs[0].mountName'],
  ['inputs mountName repeated', { inputs: [{ artifactId: 'art_1', mountName: 'data' }, { artifactId: 'art_2', mountName: 'data' }] }, 'inputs[1].mountName'],
  ['inputs artifactId missing', { inputs: [{ mountName: 'data' }] }, 'inputs[0].artifactId'],
  ['inputs artifactId with a path', { inputs: [{ artifactId: '../x', mountName: 'data' }] }, 'inputs[0].artifactId'],
  ['inputs not an array', { inputs: { artifactId: 'art_1', mountName: 'data' } }, 'inputs'],
  // outputRules
  ['outputRules path outside /output', { 'outputRules.1.path': '/tmp/checkpoints' }, 'outputRules[1].path'],
  ['outputRules path escaping /output', { 'outputRules.1.path': '/output/../etc' }, 'outputRules[1].path'],
  ['outputRules path /outputs', { 'outputRules.1.path': '/outputs' }, 'outputRules[1].path'],
  ['outputRules path with a trailing slash', { 'outputRules.1.path': '/output/checkpoints/' }, 'outputRules[1].path'],
  ['outputRules path relative', { 'outputRules.1.path': 'output/checkpoints' }, 'outputRules[1].path'],
  ['outputRules path repeated', { 'outputRules.1.path': '/output' }, 'outputRules[1].path'],
  ['outputRules maxBytes over 5 GiB', { 'outputRules.1.maxBytes': 5 * GiB + 1 }, 'outputRules[1].maxBytes'],
  ['outputRules maxBytes 0', { 'outputRules.1.maxBytes': 0 }, 'outputRules[1].maxBytes'],
  ['outputRules maxBytes a string', { 'outputRules.1.maxBytes': '1GiB' }, 'outputRules[1].maxBytes'],
  ['outputRules of 9 rules', { outputRules: range(9).map((i) => ({ path: `/output/r${i}`, maxBytes: MiB })) }, 'outputRules'],
  ['outputRules empty', { outputRules: [] }, 'outputRules'],
  ['outputRules not an array', { outputRules: { path: '/output', maxBytes: GiB } }, 'outputRules'],
  // regionPreference
  ['regionPreference unknown', { regionPreference: 'mars' }, 'regionPreference'],
  ['regionPreference a region group', { regionPreference: 'Europe' }, 'regionPreference'],
  ['regionPreference not a string', { regionPreference: 1 }, 'regionPreference'],
  // deterministic, cpuCores, ramBytes
  ['deterministic a string', { deterministic: 'yes' }, 'deterministic'],
  ['deterministic a number', { deterministic: 1 }, 'deterministic'],
  ['cpuCores a string', { cpuCores: '8' }, 'cpuCores'],
  ['cpuCores fractional', { cpuCores: 1.5 }, 'cpuCores'],
  ['cpuCores 0', { cpuCores: 0 }, 'cpuCores'],
  ['cpuCores 257', { cpuCores: 257 }, 'cpuCores'],
  ['ramBytes a string', { ramBytes: '32G' }, 'ramBytes'],
  ['ramBytes fractional', { ramBytes: 32 * GiB + 0.5 }, 'ramBytes'],
  ['ramBytes under 256 MiB', { ramBytes: 256 * MiB - 1 }, 'ramBytes'],
  ['ramBytes over 2 TiB', { ramBytes: 2 * 1024 * GiB + 1 }, 'ramBytes'],
  // title
  ['title of 121 characters', { title: 'x'.repeat(121) }, 'title'],
  ['title of 121 emoji', { title: '🚀'.repeat(121) }, 'title'],
  ['title not a string', { title: 42 }, 'title'],
  ['title with a NUL character', { title: 'a\u0000b' }, 'title'],
  // unknown fields, top-level and nested
  ['unknown top-level field', { gpus: 2 }, 'gpus'],
  ['unknown top-level field that is not an identifier', { 'x-y': 1 }, '["x-y"]'],
  ['unknown field in gpu', { 'gpu.vram': 24 }, 'gpu.vram'],
  ['unknown field in estRuntime', { 'estRuntime.typical': 1200 }, 'estRuntime.typical'],
  ['unknown field in networkPolicy', { 'networkPolicy.ports': [443] }, 'networkPolicy.ports'],
  ['unknown field in an input', { inputs: [{ artifactId: 'art_1', mountName: 'data', readOnly: false }] }, 'inputs[0].readOnly'],
  ['unknown field in an output rule', { 'outputRules.0.mode': 'append' }, 'outputRules[0].mode'],
];

/** Bodies at the edges of each rule that must be accepted (201). */
const ACCEPTED: ReadonlyArray<readonly [rule: string, patch: Patch]> = [
  ['the minimal body', { command: undefined, 'gpu.minimumVramGb': undefined, 'gpu.modelAllowlist': undefined, workloadType: undefined, maxRuntimeSeconds: undefined, maxPricePerGpuHour: undefined, estRuntime: undefined, paymentToken: undefined, env: undefined, networkPolicy: undefined, outputRules: undefined, regionPreference: undefined, deterministic: undefined, cpuCores: undefined, ramBytes: undefined, title: undefined }],
  ['image pinned by digest, imageDigest equal', { image: `ghcr.io/acme/trainer:1.4@${DIGEST_A}`, imageDigest: DIGEST_A }],
  ['imageDigest alone', { imageDigest: DIGEST_B }],
  ['image with a registry port and no tag', { image: 'registry.example.com:5000/team/app' }],
  ['command empty (the image entrypoint)', { command: [] }],
  ['command of 128 arguments', { command: range(128).map((i) => `a${i}`) }],
  ['command of exactly 32 KiB', { command: ['x'.repeat(16 * KiB), 'y'.repeat(16 * KiB)] }],
  ['gpu.count 8 on one machine', { 'gpu.count': 8, 'gpu.minimumVramGb': 80 }],
  ['gpu.minimumVramBytes alone', { 'gpu.minimumVramGb': undefined, 'gpu.minimumVramBytes': 24 * GiB }],
  ['maxRuntimeSeconds 60 with a matching estimate', { maxRuntimeSeconds: 60, estRuntime: { minSeconds: 0, maxSeconds: 60 } }],
  ['maxRuntimeSeconds 604800', { maxRuntimeSeconds: 604_800 }],
  ['maxPricePerGpuHour as a number', { maxPricePerGpuHour: 4.5 }],
  ['maxPricePerGpuHour with 6 decimals', { maxPricePerGpuHour: '4.500001' }],
  ['maxPricePerGpuHourMicroUsd alone', { maxPricePerGpuHour: undefined, maxPricePerGpuHourMicroUsd: 4_500_000 }],
  ['estRuntime bounds equal to maxRuntimeSeconds', { estRuntime: { minSeconds: 7200, maxSeconds: 7200 } }],
  ['paymentToken eth', { paymentToken: 'eth' }],
  ['env of 32 variables', { env: Object.fromEntries(range(32).map((i) => [`VAR_${i}`, 'x'])) }],
  ['env names that only resemble secrets', { env: { MONKEY_COUNT: '3', TOKENIZER_PATH: '/m/tok', MAX_TOKENS: '512', KEYBOARD_LAYOUT: 'us' } }],
  ['env value of 4 KiB', { env: { PROMPT: 'x'.repeat(4 * KiB) } }],
  ['networkPolicy none', { networkPolicy: { mode: 'none' } }],
  ['outputRules of 8 rules at 5 GiB', { outputRules: range(8).map((i) => ({ path: i === 0 ? '/output' : `/output/r${i}`, maxBytes: 5 * GiB })) }],
  ['title of 120 emoji', { title: '🚀'.repeat(120) }],
  ['cpuCores and ramBytes at their bounds', { cpuCores: 256, ramBytes: 256 * MiB }],
  ['deterministic true', { deterministic: true }],
];

/** A test app with a small priced fleet: 4 × RTX 4090 in europe-west and 8 × H100 in us-east. */
async function jobsApp(t: Test, env: Record<string, string> = {}): Promise<TestApp & { post(payload: unknown, headers?: Record<string, string>): Promise<LightMyRequestResponse> }> {
  const built = await buildTestApp(t, { env });
  const farm = await createFarm(built.db, { slug: 'validation-farm' });
  await createMachine(built.db, { farmId: farm.id, regionKey: 'europe-west', classId: 'rtx-4090-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 400_000 });
  await createMachine(built.db, { farmId: farm.id, regionKey: 'us-east', classId: 'h100-80gb-sxm', gpuCount: 8, pricePerGpuHourMicroUsd: 2_500_000 });
  await built.offerIndex.refresh();

  // POST /v1/jobs allows 30 calls a minute per key: a fresh key every 25 calls.
  let key = '';
  let uses = Infinity;
  const post = async (payload: unknown, headers: Record<string, string> = {}) => {
    if (uses >= 25) {
      key = (await createTestKey(built.db, { scopes: ['jobs:create'] })).key;
      uses = 0;
    }
    uses++;
    return built.app.inject({
      method: 'POST',
      url: '/v1/jobs',
      headers: { ...bearer(key), 'content-type': 'application/json', ...headers },
      payload: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
  };
  return { ...built, post };
}

/** A 422 validation_error whose details name exactly `fields` (in any order), each message starting with its field. */
function assertFields(t: Test, res: LightMyRequestResponse, fields: readonly string[]): void {
  assertError(t, res, 'validation_error', 422);
  const parsed = errorEnvelopeSchema.safeParse(res.json());
  if (!parsed.success) return;
  const details = parsed.data.error.details;
  t.same(details.map((d) => d.field).sort(), [...fields].sort(), `details name exactly ${fields.join(', ')} (got ${JSON.stringify(details)})`);
  for (const d of details) t.ok(d.message.startsWith(d.field), `the message names the path: ${d.message.slice(0, 200)}`);
}

t.test('POST /v1/jobs validation', async (t) => {
  const { post } = await jobsApp(t, { GF_STABLE_TOKEN_ADDRESS: STABLE_TOKEN });

  t.test('default: the valid base body is created', async (t) => {
    const res = await post(body());
    t.equal(res.statusCode, 201, 'created', { body: res.body.slice(0, 500) });
    const created = jobCreatedSchema.parse(res.json());
    t.match(created, {
      object: 'job.created',
      job: { status: 'CREATED', verificationLevel: null },
      policy: { verdict: 'allowed', findings: [] },
      funding: null,
      idempotentReplay: false,
      defaults: [],
    });
    t.match(created.job.id, /^job_/);
    t.same([...created.estimate.matchedClasses].sort(), ['h100-80gb-sxm', 'rtx-4090-24gb']);
    t.equal(created.job.pricing.maxPricePerGpuHourMicroUsd, 5_000_000, 'the "5.00" cap converted exactly');
  });

  for (const [rule, patch] of ACCEPTED) {
    t.test(`args: ${rule} is accepted`, async (t) => {
      const res = await post(body(patch));
      t.equal(res.statusCode, 201, 'created', { body: res.body.slice(0, 500) });
      if (res.statusCode === 201) t.ok(jobCreatedSchema.safeParse(res.json()).success, 'the response parses as job.created');
    });
  }

  for (const [rule, patch, field] of CASES) {
    t.test(`error: validation_error (${rule})`, async (t) => {
      const input = body(patch);
      t.not(JSON.stringify(input), JSON.stringify(BASE), 'the case changes the base body');
      assertFields(t, await post(input), [field]);
    });
  }

  t.test('error: validation_error (five independent rules broken at once list five fields)', async (t) => {
    const res = await post(body({ image: 'Not A/Valid Image', 'gpu.count': 17, env: env({ OPENAI_API_KEY: 'sk-x' }), 'outputRules.1.path': '/tmp', surprise: true }));
    assertFields(t, res, ['image', 'gpu.count', 'env.OPENAI_API_KEY', 'outputRules[1].path', 'surprise']);
    t.equal(errorEnvelopeSchema.parse(res.json()).error.details.length, 5);
  });

  t.test('error: validation_error (two unknown fields give two entries)', async (t) => {
    assertFields(t, await post(body({ a: 1, b: 2 })), ['a', 'b']);
  });

  t.test('error: validation_error (a body that is not a JSON object)', async (t) => {
    for (const payload of ['[]', '"busybox"', '5', 'true', 'null', JSON.stringify([body()])]) {
      assertFields(t, await post(payload), ['body']);
    }
  });

  t.test('error: validation_error (nothing offered fits the job, no price cap)', async (t) => {
    assertFields(t, await post(body({ 'gpu.count': 16, maxPricePerGpuHour: undefined })), ['gpu']);
    assertFields(t, await post(body({ 'gpu.modelAllowlist': ['a100-80gb'], maxPricePerGpuHour: undefined })), ['gpu']);
  });

  t.test('error: validation_error (an input artifact the account does not have)', async (t) => {
    assertFields(t, await post(body({ inputs: [{ artifactId: 'art_unknown', mountName: 'data' }] })), ['inputs[0].artifactId']);
  });

  t.test('error: invalid_json', async (t) => {
    for (const payload of ['{', '{"image": "busybox",}', "{'image': 'busybox'}", 'image=busybox', '{"image": "busybox"} trailing']) {
      assertError(t, await post(payload), 'invalid_json', 400);
    }
  });

  t.test('error: payload_too_large (a body over 256 KiB)', async (t) => {
    const filler = 'x'.repeat(256 * KiB);
    const res = await post(body({ title: filler }));
    assertError(t, res, 'payload_too_large', 413);
  });

  t.test('behavior: a body just under 256 KiB is read and validated', async (t) => {
    const input = body({ title: '' });
    const size = Buffer.byteLength(JSON.stringify(input));
    assertFields(t, await post(body({ title: 'x'.repeat(256 * KiB - size) })), ['title']);
  });
});

t.test('POST /v1/jobs validation without a stablecoin configured', async (t) => {
  const { post } = await jobsApp(t);

  t.test('error: validation_error (paymentToken stable on a deployment without one)', async (t) => {
    assertFields(t, await post(body({ paymentToken: 'stable' })), ['paymentToken']);
  });

  t.test('default: an omitted paymentToken is eth', async (t) => {
    const res = await post(body({ paymentToken: undefined }));
    t.equal(res.statusCode, 201, 'created', { body: res.body.slice(0, 500) });
    const created = jobCreatedSchema.parse(res.json());
    t.equal(created.job.payment.symbol, 'ETH');
    t.same(created.defaults, [{ field: 'paymentToken', value: 'eth' }]);
  });
});
