import { z } from 'zod';
import { WORKLOAD_TYPES } from '../constants.js';
import { fieldDetail, type ErrorDetail } from '../errors.js';
import { gpuClassIds, isGpuClassIdShape } from '../catalog/gpu-classes.js';
import { findRegion, regionKeys } from '../catalog/regions.js';
import { formatMicroUsd, parseUsdToMicroUsd } from '../money.js';
import { isDnsName } from '../net/dns-name.js';
import { fieldError, formatFieldPath, isCleanText, issuesToDetails, utf8ByteLength } from './common.js';

/**
 * The job creation specification: the body of `POST /v1/jobs` (spec table "Job creation
 * specification"). Every object is strict: an unknown field is an error. Defaults (workload
 * type, runtime, price, network, outputs) are applied by the server and reported in the
 * creation response's `defaults`; this schema only keeps the fields optional.
 *
 * `parseJobCreateRequest` turns any body into a value or into `error.details` with exactly
 * one entry per offending field.
 */

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;
const TiB = 1024 * GiB;

/** Limits of the job specification. Spec values where it gives one; ours where it is silent. */
export const JOB_SPEC_LIMITS = {
  gpuCountMin: 1,
  gpuCountMax: 16,
  /** Ours: no GPU has more; keeps the byte figure far inside the safe-integer range. */
  minimumVramGbMax: 1024,
  minimumVramBytesMax: TiB,
  maxRuntimeSecondsMin: 60,
  maxRuntimeSecondsMax: 604_800,
  commandMaxArgs: 128,
  /** "32 KB" of the spec, read as 32 KiB: the sum of the UTF-8 byte lengths of all arguments. */
  commandMaxBytes: 32 * KiB,
  envMaxEntries: 32,
  /** Ours: each env value at most 4 KiB of UTF-8. */
  envValueMaxBytes: 4 * KiB,
  /** Ours: at most 32 names in a network allowlist. */
  allowMaxNames: 32,
  /** Ours: at most 32 mounted inputs. */
  inputsMax: 32,
  /** Ours: 1 to 8 output rules. */
  outputRulesMin: 1,
  outputRulesMax: 8,
  outputRuleMaxBytes: 5 * GiB,
  cpuCoresMin: 1,
  cpuCoresMax: 256,
  ramBytesMin: 256 * MiB,
  ramBytesMax: 2 * TiB,
  /** Unicode code points, not UTF-16 units. */
  titleMaxChars: 120,
  /** Ours: a price cap above USD 1,000 per GPU-hour is a typo; it also bounds the escrow math. */
  maxPricePerGpuHourMicroUsdMax: 1_000_000_000,
  /** distribution/reference caps the name at 255; tag (128) and digest (71) come on top. */
  imageMaxLength: 512,
  imageNameMaxLength: 255,
} as const;

/** What the server uses for omitted fields (the price default needs live capacity, so it is not here). */
export const JOB_SPEC_DEFAULTS = {
  workloadType: 'custom',
  maxRuntimeSeconds: 3600,
  networkPolicy: { mode: 'none' },
  outputRules: [{ path: '/output', maxBytes: GiB }],
} as const;

const L = JOB_SPEC_LIMITS;

// ---------------------------------------------------------------------------------------------
// Container image references, after the grammar of github.com/distribution/reference:
//   reference := name [ ":" tag ] [ "@" digest ]
//   name      := [ domain "/" ] path-component ( "/" path-component )*
//   domain    := host [ ":" port ] ; host := domain-name | "[" IPv6 "]"
//   path-component := [a-z0-9]+ ( separator [a-z0-9]+ )* ; separator := [._] | "__" | "-"+
//   tag       := [\w][\w.-]{0,127}
// Digests are restricted to sha256 with 64 lower-case hex digits, the only kind we pull by.
// ---------------------------------------------------------------------------------------------
const ALNUM = '[a-z0-9]+';
const SEPARATOR = '(?:[._]|__|-+)';
const PATH_COMPONENT = `${ALNUM}(?:${SEPARATOR}${ALNUM})*`;
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN_NAME = `${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*`;
const HOST = `(?:${DOMAIN_NAME}|\\[[a-fA-F0-9:]+\\])`;
const DOMAIN = `${HOST}(?::[0-9]+)?`;
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = 'sha256:[a-f0-9]{64}';
const IMAGE_REFERENCE = new RegExp(`^(${NAME})(?::(${TAG}))?(?:@(${DIGEST}))?$`);
const DIGEST_ONLY = new RegExp(`^${DIGEST}$`);

export interface ImageReference {
  /** Registry and repository path, e.g. `127.0.0.1:5000/gpufarm/canary`. */
  name: string;
  tag: string | null;
  /** `sha256:<64 hex>` when the reference pins a digest. */
  digest: string | null;
}

/** Splits a container image reference, or returns null when it is not one. */
export function parseImageReference(ref: string): ImageReference | null {
  if (typeof ref !== 'string' || ref.length > L.imageMaxLength) return null;
  const m = IMAGE_REFERENCE.exec(ref);
  if (!m || m[1] === undefined || m[1].length > L.imageNameMaxLength) return null;
  return { name: m[1], tag: m[2] ?? null, digest: m[3] ?? null };
}

/** The digest pinned in an image reference (`name@sha256:…`), or null. */
export function imageDigestOf(image: string): string | null {
  return parseImageReference(image)?.digest ?? null;
}

// ---------------------------------------------------------------------------------------------
// Environment variable names
// ---------------------------------------------------------------------------------------------
const POSIX_ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Short secret words match only as a whole segment of the name, so `API_KEY` and `apiKey` are
 * refused but `MONKEY_COUNT` and `TOKENIZER_PATH` are not. Segments are split on `_`, digits
 * and camelCase boundaries.
 */
const SECRET_SEGMENTS: ReadonlySet<string> = new Set([
  'KEY', 'KEYS', 'TOKEN',
  // Compound words people write without a separator, and GitHub's "personal access token".
  'AUTHKEY', 'PRIVKEY', 'SIGNINGKEY', 'APITOKEN', 'AUTHTOKEN', 'ACCESSTOKEN', 'BEARERTOKEN', 'PAT',
]);
/**
 * Long secret words match anywhere in the name, case-insensitively. A bare seed is an ordinary
 * ML setting (`SEED`, `RANDOM_SEED`, `PYTHONHASHSEED`); a wallet's seed is a secret.
 */
const SECRET_SUBSTRINGS = ['PASSWORD', 'PASSWD', 'PASSPHRASE', 'SECRET', 'PRIVATE', 'CREDENTIAL', 'MNEMONIC', 'APIKEY', 'ACCESSKEY', 'SEEDPHRASE', 'SEED_PHRASE', 'WALLETSEED', 'WALLET_SEED'];
/** Well-known credential variables, refused by exact (case-insensitive) name. */
export const KNOWN_SECRET_ENV_NAMES = [
  'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'GOOGLE_APPLICATION_CREDENTIALS',
  'AZURE_CLIENT_SECRET', 'AZURE_STORAGE_CONNECTION_STRING', 'HF_TOKEN', 'HUGGING_FACE_HUB_TOKEN',
  'GITHUB_TOKEN', 'GH_TOKEN', 'GITLAB_TOKEN', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'WANDB_API_KEY',
  'NGC_API_KEY', 'KAGGLE_KEY', 'NPM_TOKEN', 'DOCKER_AUTH_CONFIG', 'DATABASE_URL', 'MYSQL_PWD', 'PGPASSWORD',
] as const;
const knownSecretNames: ReadonlySet<string> = new Set(KNOWN_SECRET_ENV_NAMES);

/**
 * True when an env name looks like it carries a secret (hosts can read a job's environment).
 * See SECRET_SEGMENTS / SECRET_SUBSTRINGS for the rule: whole-segment match for short words
 * (KEY, TOKEN), substring match for long ones (PASSWORD, SECRET, PRIVATE, CREDENTIAL,
 * MNEMONIC, a wallet's seed), plus a list of well-known credential variables.
 */
export function looksLikeSecretEnvName(name: string): boolean {
  const upper = name.toUpperCase();
  if (knownSecretNames.has(upper)) return true;
  if (SECRET_SUBSTRINGS.some((word) => upper.includes(word))) return true;
  const segments = name
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .toUpperCase()
    .split(/[_0-9]+/)
    .filter((s) => s !== '');
  return segments.some((segment) => SECRET_SEGMENTS.has(segment));
}

const PROXY_ENV_NAMES: ReadonlySet<string> = new Set(['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'ALL_PROXY']);

/**
 * Names the platform sets itself: the `GF_` prefix (`GF_JOB_ID`, …) and the proxy variables
 * that carry an egress allowlist. A job may not override them.
 */
export function isReservedEnvName(name: string): boolean {
  const upper = name.toUpperCase();
  return upper.startsWith('GF_') || PROXY_ENV_NAMES.has(upper);
}

// ---------------------------------------------------------------------------------------------
// DNS names and output paths
// ---------------------------------------------------------------------------------------------
/** Defined beside the public-name rules (`net/dns-name.ts`); re-exported for the schema's callers. */
export { isDnsName };

const OUTPUT_SEGMENT = /^[A-Za-z0-9._-]+$/;
/** `isOutputPath` as a JSON Schema pattern, for the OpenAPI document (the 255-byte cap is its maxLength). */
const OUTPUT_PATH_PATTERN = '^/output(?:/(?!\\.\\.?(?:/|$))[A-Za-z0-9._-]+)*$';

/**
 * `/output` or a normalized absolute path below it: segments of letters, digits, `.`, `_`
 * and `-`, no `.` or `..` segment, no empty segment (`//`) and no trailing slash, 255 bytes at most.
 */
export function isOutputPath(path: string): boolean {
  if (path === '/output') return true;
  if (!path.startsWith('/output/') || path.length > 255) return false;
  return path
    .slice('/output/'.length)
    .split('/')
    .every((segment) => OUTPUT_SEGMENT.test(segment) && segment !== '.' && segment !== '..');
}

const MOUNT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const ARTIFACT_ID = /^[A-Za-z0-9_-]{1,128}$/;

// ---------------------------------------------------------------------------------------------
// Field schemas. Messages are predicates; issuesToDetails prefixes the field path.
// ---------------------------------------------------------------------------------------------
function intRange(min: number, max: number, what = 'an integer') {
  const e = fieldError(`must be ${what} from ${min} to ${max}`);
  return z.int(e).min(min, e).max(max, e);
}

const IMAGE_MESSAGE =
  'must be a container image reference such as "busybox", "ghcr.io/org/app:1.2" or "registry:5000/app@sha256:<64 hex>" (lower-case repository path, at most 512 characters)';
// `.meta` carries the rules a refinement checks into the OpenAPI document (JSON Schema keywords); parsing is unchanged.
const imageSchema = z
  .string(fieldError(IMAGE_MESSAGE))
  .refine((s) => parseImageReference(s) !== null, fieldError(IMAGE_MESSAGE))
  .meta({ maxLength: L.imageMaxLength, pattern: IMAGE_REFERENCE.source, description: `A container image reference; its repository name at most ${L.imageNameMaxLength} characters.` });

const DIGEST_MESSAGE = 'must be "sha256:" followed by 64 lower-case hex digits';
const imageDigestSchema = z.string(fieldError(DIGEST_MESSAGE)).regex(DIGEST_ONLY, fieldError(DIGEST_MESSAGE));

const ARG_MESSAGE = 'must be a string without NUL characters';
const commandSchema = z
  .array(z.string(fieldError(ARG_MESSAGE)).refine(isCleanText, fieldError(ARG_MESSAGE)), fieldError('must be an array of strings'))
  .max(L.commandMaxArgs, fieldError(`must have at most ${L.commandMaxArgs} arguments`))
  .superRefine((argv, ctx) => {
    const total = argv.reduce((sum, arg) => sum + (typeof arg === 'string' ? utf8ByteLength(arg) : 0), 0);
    if (total > L.commandMaxBytes) {
      ctx.addIssue({ code: 'custom', message: `must be at most ${L.commandMaxBytes} bytes in total (UTF-8), got ${total}` });
    }
    if (argv[0] === '') ctx.addIssue({ code: 'custom', path: [0], message: 'must name the executable (not empty)' });
  }, { when: (payload) => Array.isArray(payload.value) })
  .meta({ description: `The full argv, at most ${L.commandMaxArgs} arguments and ${L.commandMaxBytes} bytes (UTF-8) in total; no argument holds a NUL character.` });

// Derived classes (`derived-…`) exist once a farm brings such a GPU: the control plane checks those ids against its classes.
const ALLOWLIST_MESSAGE = `must be a known GPU class id (one of: ${gpuClassIds.join(', ')}; or a derived class id that GET /v1/pricing lists)`;
const modelAllowlistSchema = z
  .array(z.string(fieldError(ALLOWLIST_MESSAGE)).refine((id) => isGpuClassIdShape(id), fieldError(ALLOWLIST_MESSAGE)), fieldError('must be a non-empty array of GPU class ids'))
  .min(1, fieldError('must be a non-empty array of GPU class ids'))
  .superRefine((ids, ctx) => {
    const first = new Map<unknown, number>();
    ids.forEach((id, i) => {
      const j = first.get(id);
      if (j === undefined) first.set(id, i);
      else ctx.addIssue({ code: 'custom', path: [i], message: `repeats gpu.modelAllowlist[${j}]; list each class once` });
    });
  }, { when: (payload) => Array.isArray(payload.value) })
  .meta({ uniqueItems: true, description: 'GPU class ids (GET /v1/pricing lists them), each once.' });

const gpuSchema = z
  .strictObject(
    {
      count: intRange(L.gpuCountMin, L.gpuCountMax),
      minimumVramGb: z
        .number(fieldError(`must be a number of GiB above 0 and at most ${L.minimumVramGbMax}`))
        .positive(fieldError(`must be a number of GiB above 0 and at most ${L.minimumVramGbMax}`))
        .max(L.minimumVramGbMax, fieldError(`must be a number of GiB above 0 and at most ${L.minimumVramGbMax}`))
        .optional(),
      minimumVramBytes: intRange(1, L.minimumVramBytesMax).optional(),
      modelAllowlist: modelAllowlistSchema.optional(),
      /** Only machines that proved their GPUs with a GPU challenge (beyond the spec); absent means false. */
      proven: z.boolean(fieldError('must be true or false')).optional(),
    },
    fieldError('must be an object such as {"count": 1}'),
  )
  .superRefine((gpu, ctx) => {
    if (gpu.minimumVramGb !== undefined && gpu.minimumVramBytes !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['minimumVramBytes'], message: 'cannot be combined with gpu.minimumVramGb; send only one of them' });
    }
  }, { when: (payload) => isPlainObject(payload.value) });

const WORKLOAD_MESSAGE = `must be one of ${WORKLOAD_TYPES.join(', ')}`;
const PRICE_MESSAGE = 'must be a USD amount per GPU-hour, as a number or a decimal string such as "2.5"';
const PRICE_RANGE_MESSAGE = `must be above 0 and at most ${formatMicroUsd(L.maxPricePerGpuHourMicroUsdMax)} USD per GPU-hour`;

const maxPriceSchema = z
  .union([z.number(), z.string()], fieldError(PRICE_MESSAGE))
  .superRefine((value, ctx) => {
    const parsed = parseUsdToMicroUsd(value);
    if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.message });
    else if (parsed.microUsd <= 0 || parsed.microUsd > L.maxPricePerGpuHourMicroUsdMax) ctx.addIssue({ code: 'custom', message: PRICE_RANGE_MESSAGE });
  })
  // Numeric keywords bind the number form, pattern the string form.
  .meta({
    exclusiveMinimum: 0,
    maximum: L.maxPricePerGpuHourMicroUsdMax / 1_000_000,
    pattern: '^\\d+(?:\\.\\d+)?$',
    maxLength: 64,
    description: 'USD per GPU-hour, as a number or a decimal string such as "2.5"; at most 6 decimal places (1 micro-USD).',
  });

const maxPriceMicroUsdSchema = z
  .int(fieldError(`must be an integer of micro-USD from 1 to ${L.maxPricePerGpuHourMicroUsdMax}`))
  .min(1, fieldError(`must be an integer of micro-USD from 1 to ${L.maxPricePerGpuHourMicroUsdMax}`))
  .max(L.maxPricePerGpuHourMicroUsdMax, fieldError(`must be an integer of micro-USD from 1 to ${L.maxPricePerGpuHourMicroUsdMax}`));

const estRuntimeSchema = z
  .strictObject(
    {
      minSeconds: intRange(0, L.maxRuntimeSecondsMax),
      maxSeconds: intRange(1, L.maxRuntimeSecondsMax),
    },
    fieldError('must be an object {"minSeconds": <int>, "maxSeconds": <int>}'),
  )
  .superRefine((est, ctx) => {
    if (isIntIn(est.minSeconds, 0, L.maxRuntimeSecondsMax) && isIntIn(est.maxSeconds, 1, L.maxRuntimeSecondsMax) && est.minSeconds > est.maxSeconds) {
      ctx.addIssue({ code: 'custom', path: ['minSeconds'], message: `must not exceed estRuntime.maxSeconds (${est.maxSeconds})` });
    }
  }, { when: (payload) => isPlainObject(payload.value) });

const ENV_VALUE_MESSAGE = `must be a string of at most ${L.envValueMaxBytes} bytes (UTF-8) without NUL characters`;
const envSchema = z
  .record(z.string(), z.string(fieldError(ENV_VALUE_MESSAGE)), fieldError('must be an object of NAME: "value" pairs'))
  .superRefine((env, ctx) => {
    const names = Object.keys(env);
    if (names.length > L.envMaxEntries) {
      ctx.addIssue({ code: 'custom', message: `must have at most ${L.envMaxEntries} variables, got ${names.length}` });
    }
    for (const name of names) {
      const value: unknown = env[name];
      let message: string | null = null;
      if (!POSIX_ENV_NAME.test(name)) message = 'must be a POSIX variable name: letters, digits and _, not starting with a digit';
      else if (isReservedEnvName(name)) message = 'is reserved: the platform sets GF_* and proxy variables itself';
      else if (looksLikeSecretEnvName(name)) message = 'looks like a secret and is refused: the host running the job can read its environment';
      else if (typeof value === 'string' && (utf8ByteLength(value) > L.envValueMaxBytes || !isCleanText(value))) message = ENV_VALUE_MESSAGE;
      if (message) ctx.addIssue({ code: 'custom', path: [name], message });
    }
  }, { when: (payload) => isPlainObject(payload.value) })
  .meta({
    maxProperties: L.envMaxEntries,
    propertyNames: { type: 'string', pattern: POSIX_ENV_NAME.source },
    description: `At most ${L.envMaxEntries} non-secret variables, each value at most ${L.envValueMaxBytes} bytes (UTF-8). Names that look like secrets, GF_* and the proxy variables are refused: the host can read a job's environment.`,
  });

const DNS_MESSAGE = 'must be a DNS host name such as "huggingface.co" (no scheme, port, path, wildcard, trailing dot or IP address)';
const networkPolicySchema = z.discriminatedUnion(
  'mode',
  [
    z.strictObject({ mode: z.literal('none') }),
    z.strictObject({
      mode: z.literal('allowlist'),
      allow: z
        .array(z.string(fieldError(DNS_MESSAGE)).refine(isDnsName, fieldError(DNS_MESSAGE)), fieldError(`must be an array of 1 to ${L.allowMaxNames} DNS names`))
        .min(1, fieldError(`must be an array of 1 to ${L.allowMaxNames} DNS names`))
        .max(L.allowMaxNames, fieldError(`must be an array of 1 to ${L.allowMaxNames} DNS names`)),
    }),
  ],
  {
    error: (issue) => {
      if (issue.input === undefined) return 'is required';
      if (issue.code === 'invalid_union') return 'must be "none" or "allowlist"';
      return 'must be an object such as {"mode": "none"} or {"mode": "allowlist", "allow": ["example.com"]}';
    },
  },
);

const MOUNT_MESSAGE = 'must be 1 to 64 characters of letters, digits, ".", "_" and "-", starting with a letter or digit';
const ARTIFACT_ID_MESSAGE = 'must be an artifact id (1 to 128 letters, digits, "_" or "-")';
const inputsSchema = z
  .array(
    z.strictObject(
      {
        artifactId: z.string(fieldError(ARTIFACT_ID_MESSAGE)).regex(ARTIFACT_ID, fieldError(ARTIFACT_ID_MESSAGE)),
        // The leading letter or digit already rules out "." and "..".
        mountName: z.string(fieldError(MOUNT_MESSAGE)).regex(MOUNT_NAME, fieldError(MOUNT_MESSAGE)),
      },
      fieldError('must be an object {"artifactId": …, "mountName": …}'),
    ),
    fieldError(`must be an array of at most ${L.inputsMax} inputs`),
  )
  .max(L.inputsMax, fieldError(`must be an array of at most ${L.inputsMax} inputs`))
  .superRefine((inputs, ctx) => {
    const first = new Map<string, number>();
    inputs.forEach((input, i) => {
      const name: unknown = isPlainObject(input) ? input.mountName : undefined;
      if (typeof name !== 'string') return;
      const j = first.get(name);
      if (j === undefined) first.set(name, i);
      else ctx.addIssue({ code: 'custom', path: [i, 'mountName'], message: `repeats inputs[${j}].mountName; mount names must be unique` });
    });
  }, { when: (payload) => Array.isArray(payload.value) });

const OUTPUT_PATH_MESSAGE = 'must be /output or a normalized absolute path under /output/ (no ".", "..", "//" or trailing "/"; letters, digits, ".", "_" and "-")';
const outputRulesSchema = z
  .array(
    z.strictObject(
      {
        path: z.string(fieldError(OUTPUT_PATH_MESSAGE)).refine(isOutputPath, fieldError(OUTPUT_PATH_MESSAGE)).meta({ maxLength: 255, pattern: OUTPUT_PATH_PATTERN }),
        maxBytes: intRange(1, L.outputRuleMaxBytes, 'an integer number of bytes'),
      },
      fieldError('must be an object {"path": "/output", "maxBytes": <int>}'),
    ),
    fieldError(`must be an array of ${L.outputRulesMin} to ${L.outputRulesMax} rules`),
  )
  .min(L.outputRulesMin, fieldError(`must be an array of ${L.outputRulesMin} to ${L.outputRulesMax} rules`))
  .max(L.outputRulesMax, fieldError(`must be an array of ${L.outputRulesMin} to ${L.outputRulesMax} rules`))
  .superRefine((rules, ctx) => {
    const first = new Map<string, number>();
    rules.forEach((rule, i) => {
      const path: unknown = isPlainObject(rule) ? rule.path : undefined;
      if (typeof path !== 'string') return;
      const j = first.get(path);
      if (j === undefined) first.set(path, i);
      else ctx.addIssue({ code: 'custom', path: [i, 'path'], message: `repeats outputRules[${j}].path; each path may have one rule` });
    });
  }, { when: (payload) => Array.isArray(payload.value) });

const REGION_MESSAGE = `must be a known region key (one of: ${regionKeys.join(', ')})`;
const TITLE_MESSAGE = `must be a string of at most ${L.titleMaxChars} characters without NUL characters`;

/** The job creation request. Cross-field rules report the field that is wrong. */
export const jobCreateRequestSchema = z
  .strictObject(
    {
      image: imageSchema,
      imageDigest: imageDigestSchema.optional(),
      command: commandSchema.optional(),
      gpu: gpuSchema,
      workloadType: z.enum(WORKLOAD_TYPES, fieldError(WORKLOAD_MESSAGE)).optional(),
      maxRuntimeSeconds: intRange(L.maxRuntimeSecondsMin, L.maxRuntimeSecondsMax).optional(),
      maxPricePerGpuHour: maxPriceSchema.optional(),
      maxPricePerGpuHourMicroUsd: maxPriceMicroUsdSchema.optional(),
      estRuntime: estRuntimeSchema.optional(),
      paymentToken: z.enum(['eth', 'stable'], fieldError('must be "eth" or "stable"')).optional(),
      env: envSchema.optional(),
      networkPolicy: networkPolicySchema.optional(),
      inputs: inputsSchema.optional(),
      outputRules: outputRulesSchema.optional(),
      regionPreference: z.string(fieldError(REGION_MESSAGE)).refine((key) => findRegion(key) !== undefined, fieldError(REGION_MESSAGE)).meta({ enum: [...regionKeys] }).optional(),
      deterministic: z.boolean(fieldError('must be true or false')).optional(),
      cpuCores: intRange(L.cpuCoresMin, L.cpuCoresMax).optional(),
      ramBytes: intRange(L.ramBytesMin, L.ramBytesMax, 'an integer number of bytes').optional(),
      title: z
        .string(fieldError(TITLE_MESSAGE))
        .refine((s) => [...s].length <= L.titleMaxChars && isCleanText(s), fieldError(TITLE_MESSAGE))
        .meta({ maxLength: L.titleMaxChars })
        .optional(),
    },
    { error: 'must be a JSON object' },
  )
  // Runs even when other fields failed, so independent mistakes are all reported; each rule
  // only looks at fields that are valid on their own.
  .superRefine((spec, ctx) => {
    if (imageDigestSchema.safeParse(spec.imageDigest).success && typeof spec.image === 'string') {
      const pinned = imageDigestOf(spec.image);
      if (pinned !== null && pinned !== spec.imageDigest) {
        ctx.addIssue({ code: 'custom', path: ['imageDigest'], message: `must equal the digest pinned in image (${pinned})` });
      }
    }
    if (spec.maxPricePerGpuHour !== undefined && spec.maxPricePerGpuHourMicroUsd !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['maxPricePerGpuHourMicroUsd'], message: 'cannot be combined with maxPricePerGpuHour; send only one of them' });
    }
    const runtime = spec.maxRuntimeSeconds === undefined ? JOB_SPEC_DEFAULTS.maxRuntimeSeconds : spec.maxRuntimeSeconds;
    const est: unknown = spec.estRuntime;
    if (
      isIntIn(runtime, L.maxRuntimeSecondsMin, L.maxRuntimeSecondsMax) &&
      isPlainObject(est) &&
      isIntIn(est.maxSeconds, 1, L.maxRuntimeSecondsMax) &&
      est.maxSeconds > runtime
    ) {
      const source = spec.maxRuntimeSeconds === undefined ? 'the default maxRuntimeSeconds' : 'maxRuntimeSeconds';
      ctx.addIssue({ code: 'custom', path: ['estRuntime', 'maxSeconds'], message: `must not exceed ${source} (${runtime})` });
    }
  }, { when: (payload) => isPlainObject(payload.value) });

export type JobCreateRequest = z.infer<typeof jobCreateRequestSchema>;
export type JobCreateParseResult = { ok: true; value: JobCreateRequest } | { ok: false; details: ErrorDetail[] };

/**
 * Validates a `POST /v1/jobs` body. On failure `details` holds exactly one entry per offending
 * field, `field` written as a path (`gpu.count`, `outputRules[0].path`, `env.AWS_SECRET`) and
 * `message` starting with that path (`gpu.count must be an integer from 1 to 16`). Each unknown
 * field gets its own entry (`<path> is not a known field`). A body that is not a JSON object
 * gives one entry with field `body`.
 *
 * @example parseJobCreateRequest({ image: 'busybox', gpu: { count: 1 } }) // { ok: true, value: … }
 */
export function parseJobCreateRequest(body: unknown): JobCreateParseResult {
  if (!isPlainObject(body)) {
    return { ok: false, details: [fieldDetail(formatFieldPath([]), 'must be a JSON object', { subject: true })] };
  }
  const result = jobCreateRequestSchema.safeParse(body);
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, details: issuesToDetails(result.error.issues) };
}

/** The price cap of a valid request in micro-USD, from either field, or null when omitted. */
export function maxPriceMicroUsdOf(spec: Pick<JobCreateRequest, 'maxPricePerGpuHour' | 'maxPricePerGpuHourMicroUsd'>): number | null {
  if (spec.maxPricePerGpuHourMicroUsd !== undefined) return spec.maxPricePerGpuHourMicroUsd;
  if (spec.maxPricePerGpuHour === undefined) return null;
  const parsed = parseUsdToMicroUsd(spec.maxPricePerGpuHour);
  if (!parsed.ok) throw new RangeError(`maxPricePerGpuHour ${parsed.message}`);
  return parsed.microUsd;
}

/**
 * The requested minimum VRAM per GPU in bytes, or null. `minimumVramGb` counts GiB, as the
 * GPU catalog and vendors' "GB" do (a request for 24 fits a 24 GiB card); scaling by 2^30 is
 * exact in floating point, and the result is rounded up to whole bytes.
 */
export function requestedVramBytes(gpu: Pick<JobCreateRequest['gpu'], 'minimumVramGb' | 'minimumVramBytes'>): number | null {
  if (gpu.minimumVramBytes !== undefined) return gpu.minimumVramBytes;
  if (gpu.minimumVramGb !== undefined) return Math.ceil(gpu.minimumVramGb * GiB);
  return null;
}

/** The digest the job must run: `imageDigest`, else the one pinned in `image`, else null. */
export function effectiveImageDigest(spec: Pick<JobCreateRequest, 'image' | 'imageDigest'>): string | null {
  return spec.imageDigest ?? imageDigestOf(spec.image);
}

function isIntIn(value: unknown, min: number, max: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= max;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
