import { errorEnvelopeSchema, jobCreatedSchema, MAX_BODY_BYTES, WORKLOAD_TYPES, type ErrorCode } from '@gpufarm/shared';
import type { LightMyRequestResponse } from 'fastify';
import t from 'tap';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { mulberry32 } from '../src/testing/seed.js';
import { bearer, buildTestApp, createTestKey } from './helpers/app.js';

/**
 * Fuzzing `POST /v1/jobs`: a seeded PRNG builds random bodies and mutations of valid ones
 * (dropped, duplicated and retyped fields, huge strings, deep nesting, unicode, numbers at the
 * bounds, NaN-ish strings, arrays for objects, raw non-JSON text, empty bodies, bodies around
 * 256 KiB). Every answer must be 201, 400, 413 or 422, errors in the spec's envelope; never 500.
 *
 * Reproduce a run with GF_FUZZ_SEED=<seed> (and GF_FUZZ_CASES=<n>); a failure lists the case
 * index, its generator and the start of its body.
 */

const SEED = Number(process.env.GF_FUZZ_SEED ?? 4663);
const CASES = Number(process.env.GF_FUZZ_CASES ?? 3000);
/** POST /v1/jobs allows 30 calls a minute per key; each key of the pool makes at most 25. */
const CALLS_PER_KEY = 25;

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Random = () => number;

interface FuzzCase {
  kind: string;
  payload: string | Buffer;
  /** null: no Content-Type header. */
  contentType: string | null;
}

const STATUS_CODES: Record<number, readonly ErrorCode[]> = {
  400: ['invalid_json', 'invalid_request'],
  413: ['payload_too_large'],
  422: ['validation_error', 'policy_rejected'],
};

// ---------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------

const int = (r: Random, min: number, max: number) => min + Math.floor(r() * (max - min + 1));
const chance = (r: Random, p: number) => r() < p;
function pick<T>(r: Random, items: readonly T[]): T {
  return items[Math.floor(r() * items.length)]!;
}

/** Sets an own enumerable key, even `__proto__`. */
function setKey(obj: { [key: string]: Json }, key: string, value: Json): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

const SPEC_KEYS = [
  'image', 'imageDigest', 'command', 'gpu', 'workloadType', 'maxRuntimeSeconds', 'maxPricePerGpuHour', 'maxPricePerGpuHourMicroUsd',
  'estRuntime', 'paymentToken', 'env', 'networkPolicy', 'inputs', 'outputRules', 'regionPreference', 'deterministic', 'cpuCores',
  'ramBytes', 'title', 'count', 'minimumVramGb', 'minimumVramBytes', 'modelAllowlist', 'minSeconds', 'maxSeconds', 'mode', 'allow',
  'artifactId', 'mountName', 'path', 'maxBytes',
];
const ODD_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '', ' ', 'image ', 'IMAGE', 'gpu.count', '0', '-1', '💥', 'a\u0000b', '\ud800'];

const BOUND_NUMBERS = [
  0, -0, 1, -1, 2, 7, 8, 9, 15, 16, 17, 59, 60, 61, 120, 121, 255, 256, 257, 3599, 3600, 3601, 604_799, 604_800, 604_801,
  2 ** 31 - 1, 2 ** 31, 2 ** 32, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 2, -Number.MAX_SAFE_INTEGER, 1e21, 1e308, -1e308,
  Number.MIN_VALUE, 0.1, 0.5, 1.5, 0.1 + 0.2, 1e-6, 1e-7, 2.675, 1000, 1000.000001, 1_000_000_000, 1_000_000_001,
  5 * GiB, 5 * GiB + 1, GiB, 256 * MiB - 1, 256 * MiB, 2 * 1024 * GiB, 2 * 1024 * GiB + 1, 1024, 1025, 32 * KiB, 32 * KiB + 1,
];
const NANISH = ['NaN', 'nan', 'Infinity', '-Infinity', 'undefined', 'null', '-0', '0x10', '1e3', '1e-6', ' 5 ', '', '5.', '.5', '+5', '٣', '1_000', '2,5', '0.0000001', '9'.repeat(400), '1e400', 'true'];

/** Strings from many scripts and edges: emoji, combining marks, RTL overrides, NUL, lone surrogates. */
function unicodeString(r: Random, maxLength = 64): string {
  const pieces = [
    () => String.fromCharCode(int(r, 0x20, 0x7e)),
    () => String.fromCharCode(int(r, 0xa0, 0x2ff)),
    () => String.fromCharCode(int(r, 0x4e00, 0x9fff)),
    () => String.fromCodePoint(int(r, 0x1f300, 0x1faff)),
    () => pick(r, ['\u0000', '\u0001', '\u001f', '\u007f', '\u200b', '\u200d', '\u202e', '\ufeff', '\uffff', '\u0301', '\n', '\t', '"', '\\', '/']),
    () => String.fromCharCode(int(r, 0xd800, 0xdfff)),
  ];
  let out = '';
  const length = int(r, 0, maxLength);
  for (let i = 0; i < length; i++) out += pick(r, pieces)();
  return out;
}

function randomScalar(r: Random): Json {
  switch (int(r, 0, 7)) {
    case 0:
      return null;
    case 1:
      return chance(r, 0.5);
    case 2:
      return pick(r, BOUND_NUMBERS);
    case 3:
      return (r() - 0.5) * 10 ** int(r, 0, 12);
    case 4:
      return pick(r, NANISH);
    case 5:
      return unicodeString(r);
    case 6:
      return pick(r, ['busybox', 'rtx-4090-24gb', 'h100-80gb-sxm', '/output', 'none', 'allowlist', 'eth', 'stable', 'batch', 'europe-west', 'huggingface.co']);
    default:
      return 'x'.repeat(int(r, 0, 300));
  }
}

/** A random JSON value of bounded size; objects use spec keys, odd keys and random ones. */
function randomValue(r: Random, depth: number): Json {
  if (depth <= 0 || chance(r, 0.45)) return randomScalar(r);
  if (chance(r, 0.5)) return Array.from({ length: int(r, 0, 5) }, () => randomValue(r, depth - 1));
  const obj: { [key: string]: Json } = {};
  const keys = int(r, 0, 6);
  for (let i = 0; i < keys; i++) {
    const key = chance(r, 0.6) ? pick(r, SPEC_KEYS) : chance(r, 0.5) ? pick(r, ODD_KEYS) : unicodeString(r, 12);
    setKey(obj, key, randomValue(r, depth - 1));
  }
  return obj;
}

/** `depth` levels of arrays or objects around a scalar. */
function deeplyNested(r: Random, depth: number): Json {
  const useArrays = chance(r, 0.5);
  let value: Json = randomScalar(r);
  for (let i = 0; i < depth; i++) value = useArrays ? [value] : { a: value };
  return value;
}

// ---------------------------------------------------------------------------------------------
// Valid bodies and their mutations
// ---------------------------------------------------------------------------------------------

/** A valid body, more or less complete, that the test fleet can price. */
function validBody(r: Random): { [key: string]: Json } {
  const count = int(r, 1, 4);
  const body: { [key: string]: Json } = { image: pick(r, ['busybox', 'ghcr.io/acme/trainer:1.4', 'registry.example.com:5000/team/app@sha256:' + 'c'.repeat(64)]), gpu: { count } };
  if (chance(r, 0.5)) body.command = ['python', 'main.py', '--steps', String(int(r, 1, 1000))];
  if (chance(r, 0.3)) (body.gpu as { [key: string]: Json }).minimumVramGb = pick(r, [8, 16, 24, 23.5]);
  if (chance(r, 0.3)) (body.gpu as { [key: string]: Json }).modelAllowlist = ['rtx-4090-24gb', 'h100-80gb-sxm'];
  if (chance(r, 0.5)) body.workloadType = pick(r, WORKLOAD_TYPES);
  const runtime = int(r, 60, 86_400);
  if (chance(r, 0.5)) body.maxRuntimeSeconds = runtime;
  if (chance(r, 0.3)) body.maxPricePerGpuHour = pick(r, [5, '4.5', '3.000001', 10]);
  else if (chance(r, 0.2)) body.maxPricePerGpuHourMicroUsd = pick(r, [3_000_000, 9_999_999]);
  if (chance(r, 0.3)) {
    const max = Math.min(body.maxRuntimeSeconds === undefined ? 3600 : runtime, int(r, 1, 3600));
    body.estRuntime = { minSeconds: int(r, 0, max), maxSeconds: max };
  }
  if (chance(r, 0.4)) body.paymentToken = pick(r, ['eth', 'stable']);
  if (chance(r, 0.4)) body.env = { BATCH_SIZE: String(int(r, 1, 512)), MODEL_NAME: 'resnet50' };
  if (chance(r, 0.3)) body.networkPolicy = chance(r, 0.5) ? { mode: 'none' } : { mode: 'allowlist', allow: ['huggingface.co', 'pypi.org'] };
  if (chance(r, 0.3)) body.outputRules = [{ path: '/output', maxBytes: GiB }, { path: '/output/logs', maxBytes: 10 * MiB }];
  if (chance(r, 0.3)) body.regionPreference = pick(r, ['europe-west', 'us-east', 'asia-east']);
  if (chance(r, 0.2)) body.deterministic = chance(r, 0.5);
  if (chance(r, 0.2)) body.cpuCores = int(r, 1, 64);
  if (chance(r, 0.2)) body.ramBytes = int(r, 1, 64) * GiB;
  if (chance(r, 0.4)) body.title = `fuzz job ${int(r, 0, 1e6)}`;
  return body;
}

interface Slot {
  parent: { [key: string]: Json } | Json[];
  key: string | number;
}

/** Every position in a value where a mutation can happen. */
function slots(value: Json, out: Slot[] = []): Slot[] {
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      out.push({ parent: value, key: i });
      slots(item, out);
    });
  } else if (value !== null && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      out.push({ parent: value, key });
      slots(value[key]!, out);
    }
  }
  return out;
}

function getSlot(slot: Slot): Json {
  return Array.isArray(slot.parent) ? slot.parent[slot.key as number]! : slot.parent[slot.key as string]!;
}

function setSlot(slot: Slot, value: Json): void {
  if (Array.isArray(slot.parent)) slot.parent[slot.key as number] = value;
  else setKey(slot.parent, slot.key as string, value);
}

const MUTATIONS: ReadonlyArray<(r: Random, body: { [key: string]: Json }, slot: Slot) => void> = [
  // drop
  (_r, _b, slot) => {
    if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 1);
    else delete slot.parent[slot.key as string];
  },
  // duplicate an array item, or copy a field into a sibling object
  (r, body, slot) => {
    if (Array.isArray(slot.parent)) slot.parent.splice(slot.key as number, 0, structuredClone(getSlot(slot)));
    else setKey(body, pick(r, SPEC_KEYS), structuredClone(getSlot(slot)));
  },
  // retype
  (r, _b, slot) => setSlot(slot, randomValue(r, 2)),
  // huge string
  (r, _b, slot) => setSlot(slot, pick(r, ['x', 'é', '🚀', 'ab', '\u0000']).repeat(int(r, 1_000, 140_000))),
  // deep nesting (deeper in the 'deep' generator, written as text)
  (r, _b, slot) => setSlot(slot, deeplyNested(r, pick(r, [10, 100, 1_000]))),
  // unicode value or key
  (r, _b, slot) => {
    if (!Array.isArray(slot.parent) && chance(r, 0.5)) {
      const value = getSlot(slot);
      delete slot.parent[slot.key as string];
      setKey(slot.parent, chance(r, 0.5) ? unicodeString(r, 16) : pick(r, ODD_KEYS), value);
    } else setSlot(slot, unicodeString(r));
  },
  // numbers at the bounds
  (r, _b, slot) => setSlot(slot, pick(r, BOUND_NUMBERS)),
  // NaN-ish strings
  (r, _b, slot) => setSlot(slot, pick(r, NANISH)),
  // arrays for objects, objects for arrays
  (_r, _b, slot) => {
    const value = getSlot(slot);
    setSlot(slot, Array.isArray(value) ? Object.fromEntries(value.map((v, i) => [String(i), v])) : [value]);
  },
  // null
  (_r, _b, slot) => setSlot(slot, null),
  // an unknown field next to this one
  (r, _b, slot) => {
    if (!Array.isArray(slot.parent)) setKey(slot.parent, pick(r, [...ODD_KEYS, 'extra', 'gpus', 'Image']), randomValue(r, 2));
    else slot.parent.push(randomValue(r, 2));
  },
];

function mutatedBody(r: Random): Json {
  const body = validBody(r);
  const rounds = int(r, 1, 4);
  for (let i = 0; i < rounds; i++) {
    const all = slots(body);
    if (all.length === 0) break;
    pick(r, MUTATIONS)(r, body, pick(r, all));
  }
  return body;
}

// ---------------------------------------------------------------------------------------------
// Raw text: not JSON, or JSON that JSON.stringify cannot write (duplicate keys, big literals)
// ---------------------------------------------------------------------------------------------

function rawText(r: Random): string | Buffer {
  const valid = JSON.stringify(validBody(r));
  switch (int(r, 0, 13)) {
    case 0:
      return valid.slice(0, int(r, 0, valid.length - 1));
    case 1:
      return valid.replace(/}$/, ',}');
    case 2:
      return valid.replaceAll('"', "'");
    case 3:
      return `// a comment\n${valid}`;
    case 4:
      return `${valid}${pick(r, ['x', '{}', ' []', '\u0000', ' 1'])}`;
    case 5:
      return pick(r, ['NaN', 'undefined', 'Infinity', '{image: "busybox"}', '{"image": busybox}', '{"gpu": {"count": 01}}', '{"gpu": {"count": .5}}', '{"gpu": {"count": +1}}', '{"a":1}{"b":2}', '[', ']', '{{}}', '"', '\\', 'nul', 'tru', 'image=busybox&gpu=1']);
    case 6:
      return Buffer.from(Array.from({ length: int(r, 1, 200) }, () => int(r, 0, 255)));
    case 7:
      return `\ufeff${valid}`;
    case 8:
      // duplicate keys: the last one wins in JSON.parse
      return valid.replace(/^\{/, `{"image": ${JSON.stringify(randomScalar(r))}, "gpu": ${JSON.stringify(randomValue(r, 2))}, `);
    case 9:
      // number literals JSON.stringify never writes
      return valid.replace(/"count":\d+/, `"count":${pick(r, ['1e400', '-1e400', '1.0000000000000000000001', '123456789012345678901234567890', '-0', '1E1', '0.0', '16.0', '1e0'])}`);
    case 10:
      // escaped lone surrogates and NUL in keys and values
      return valid.replace(/^\{/, `{"title": "\\ud800\\u0000", "\\udfff": 1, `);
    case 11:
      return `{"image": "busybox", "gpu": {"count": 1}, "__proto__": ${JSON.stringify(randomValue(r, 2))}}`;
    case 12:
      return `{"image": "busybox", "gpu": {"count": 1}, "constructor": {"prototype": {"polluted": true}}}`;
    default:
      return unicodeString(r, 200);
  }
}

/** A body whose UTF-8 size is `bytes`, padded through one string field. */
function sizedBody(r: Random, bytes: number): string {
  const body = validBody(r);
  const where = pick(r, ['title', 'extra', 'env', 'command']);
  const set = (filler: string) => {
    if (where === 'env') body.env = { PADDING: filler };
    else if (where === 'command') body.command = ['sh', filler];
    else body[where] = filler;
  };
  set('');
  const base = Buffer.byteLength(JSON.stringify(body));
  set('x'.repeat(Math.max(0, bytes - base)));
  return JSON.stringify(body);
}

function generate(r: Random): FuzzCase {
  const json = 'application/json';
  const roll = r();
  if (roll < 0.42) return { kind: 'mutated', payload: JSON.stringify(mutatedBody(r)), contentType: json };
  if (roll < 0.52) return { kind: 'valid', payload: JSON.stringify(validBody(r)), contentType: json };
  if (roll < 0.66) return { kind: 'random', payload: JSON.stringify(randomValue(r, 4)) ?? 'null', contentType: json };
  if (roll < 0.78) return { kind: 'raw', payload: rawText(r), contentType: json };
  if (roll < 0.8) return { kind: 'empty', payload: '', contentType: chance(r, 0.7) ? json : null };
  if (roll < 0.86) {
    const bytes = MAX_BODY_BYTES + pick(r, [-64, -2, -1, 0, 0, 1, 1, 2, 64, 4 * KiB]);
    return { kind: `size ${bytes}`, payload: sizedBody(r, bytes), contentType: json };
  }
  if (roll < 0.94) {
    // Written as text: JSON.stringify itself would overflow the stack at these depths.
    const depth = pick(r, [1_000, 10_000, 40_000, 100_000]);
    const nested = depth > 40_000 || chance(r, 0.5) ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const body = validBody(r);
    setKey(body, pick(r, ['title', 'gpu', 'env', 'command', 'nested']), '\u0001NESTED');
    return { kind: `deep ${depth}`, payload: JSON.stringify(body).replace('"\\u0001NESTED"', nested), contentType: json };
  }
  return {
    kind: 'content-type',
    payload: JSON.stringify(chance(r, 0.5) ? validBody(r) : mutatedBody(r)),
    contentType: pick(r, ['application/json; charset=utf-8', 'application/JSON', 'text/plain', 'application/x-www-form-urlencoded', 'application/octet-stream', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/vnd.api+json']),
  };
}

// ---------------------------------------------------------------------------------------------
// Checking an answer
// ---------------------------------------------------------------------------------------------

/** Why the answer breaks the contract, or null when it keeps it. */
function problemWith(c: FuzzCase, res: LightMyRequestResponse): string | null {
  const size = typeof c.payload === 'string' ? Buffer.byteLength(c.payload) : c.payload.length;
  // A Content-Type the route does not parse is refused (400) before the body is read.
  const refusedType = c.kind === 'content-type' && res.statusCode === 400;
  if (size > MAX_BODY_BYTES && res.statusCode !== 413 && !refusedType) return `a ${size}-byte body (over 256 KiB) must be 413, got ${res.statusCode}`;
  if (size <= MAX_BODY_BYTES && res.statusCode === 413) return `a ${size}-byte body (at most 256 KiB) must not be 413`;
  if (res.statusCode === 201) {
    const created = jobCreatedSchema.safeParse(res.json());
    return created.success ? null : `201 does not parse as job.created: ${created.error.message.slice(0, 300)}`;
  }
  const codes = STATUS_CODES[res.statusCode];
  if (!codes) return `status ${res.statusCode}: ${res.body.slice(0, 300)}`;
  let json: unknown;
  try {
    json = res.json();
  } catch {
    return `status ${res.statusCode} with a body that is not JSON: ${res.body.slice(0, 200)}`;
  }
  const envelope = errorEnvelopeSchema.safeParse(json);
  if (!envelope.success) return `status ${res.statusCode} without the error envelope: ${res.body.slice(0, 300)}`;
  const { code, requestId, details } = envelope.data.error;
  if (!codes.includes(code)) return `status ${res.statusCode} with code ${code}`;
  if (res.headers['x-request-id'] !== requestId) return `X-Request-Id ${String(res.headers['x-request-id'])} differs from the body's ${requestId}`;
  if (code === 'validation_error' || code === 'policy_rejected') {
    if (details.length === 0) return `${code} without details`;
    const fields = details.map((d) => d.field);
    if (new Set(fields).size !== fields.length) return `${code} lists a field twice: ${JSON.stringify(fields)}`;
  }
  if (code === 'validation_error') {
    const unnamed = details.find((d) => !d.message.startsWith(d.field));
    if (unnamed) return `a detail message does not name its field: ${JSON.stringify(unnamed).slice(0, 300)}`;
  }
  return null;
}

t.test('POST /v1/jobs fuzz', async (t) => {
  const { app, db, offerIndex } = await buildTestApp(t, { env: { GF_STABLE_TOKEN_ADDRESS: `0x${'ab'.repeat(20)}` } });
  const farm = await createFarm(db, { slug: 'fuzz-farm' });
  await createMachine(db, { farmId: farm.id, regionKey: 'europe-west', classId: 'rtx-4090-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 400_000 });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'h100-80gb-sxm', gpuCount: 8, pricePerGpuHourMicroUsd: 2_500_000 });
  await offerIndex.refresh();

  const keys: string[] = [];
  const needed = Math.ceil(CASES / CALLS_PER_KEY);
  while (keys.length < needed) {
    const batch = await Promise.all(Array.from({ length: Math.min(20, needed - keys.length) }, () => createTestKey(db, { scopes: ['jobs:create'] })));
    keys.push(...batch.map((k) => k.key));
  }

  t.test(`behavior: ${CASES} random and mutated bodies (seed ${SEED}) answer 201, 400, 413 or 422 in the spec's envelope`, async (t) => {
    const r = mulberry32(SEED);
    const failures: string[] = [];
    const statuses: Record<string, number> = {};
    const kinds: Record<string, number> = {};
    const problems: Record<string, number> = {};
    for (let i = 0; i < CASES; i++) {
      const c = generate(r);
      const headers: Record<string, string> = bearer(keys[Math.floor(i / CALLS_PER_KEY)]!);
      if (c.contentType !== null) headers['content-type'] = c.contentType;
      let res: LightMyRequestResponse;
      try {
        res = await app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: c.payload });
      } catch (err) {
        failures.push(`#${i} ${c.kind}: inject threw ${(err as Error).message}`);
        continue;
      }
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      const kind = c.kind.replace(/ \d+$/, '');
      kinds[kind] = (kinds[kind] ?? 0) + 1;
      const problem = problemWith(c, res);
      if (problem) {
        const group = `${kind}: ${problem.replace(/:.*$/s, '')}`;
        problems[group] = (problems[group] ?? 0) + 1;
        const preview = (typeof c.payload === 'string' ? c.payload : c.payload.toString('hex')).slice(0, 160);
        failures.push(`#${i} ${c.kind} (content-type ${String(c.contentType)}): ${problem}\n    body: ${preview}`);
      }
    }
    t.comment(`statuses ${JSON.stringify(statuses)}; generators ${JSON.stringify(kinds)}`);
    if (failures.length > 0) t.comment(`failures by generator and problem: ${JSON.stringify(problems)}`);
    t.same(failures.slice(0, 25), [], `no answer breaks the contract (${failures.length} of ${CASES} did)`);
    for (const status of ['201', '400', '413', '422']) t.ok((statuses[status] ?? 0) > 0, `the run produced ${status} answers`);
  });
});
