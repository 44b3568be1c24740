import { z } from 'zod';
import { deploymentEnv, readDeploymentFile } from './deployment-file.js';
import { WEB_DIST_DIR } from './package-files.js';
import { DEFAULT_CHAIN_ID, DEFAULT_MACHINE_LOST_GRACE_SECONDS, DEFAULT_MACHINE_OFFLINE_SECONDS, ENVIRONMENTS, errorText, GpufarmError, LISTEN_SETTING_HINT, parseBannedImagePattern, parseListenSetting, type ListenSetting, type SettingDoc } from '@gpufarm/shared';

const booleanFromEnv = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address');

/**
 * Every environment variable the control plane reads, with its default. `ENV_DOCS` below says
 * what each means; `npm run docs` writes both into docs/deploy/configuration.md.
 */
export const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  GF_DATA_DIR: z.string().min(1).default('.gpufarm'),
  // On for the embedded quick path; a deployment runs `migrate` once and starts its replicas with false.
  GF_MIGRATE_ON_START: booleanFromEnv.default(true),
  GF_ENVIRONMENT: z.enum(ENVIRONMENTS).default('local'),
  // Default: on for `local` only (npm start, the demo, tests); refused on mainnet (see loadConfig).
  GF_ALLOW_SIMULATED_MACHINES: booleanFromEnv.optional(),
  GF_CHAIN_ID: z.coerce.number().int().positive().default(DEFAULT_CHAIN_ID),
  GF_PUBLIC_URL: z.url().optional(),
  GF_PLATFORM_FEE_BPS: z.coerce.number().int().min(0).max(10_000).default(1000),
  GF_RATE_LIMIT_STORE: z
    .enum(['memory', 'redis'], { error: 'must be memory or redis (the PostgreSQL store is gone: requests do not write the database; shared limits live in Redis, GF_REDIS_URL)' })
    .optional(),
  GF_REDIS_URL: z.url({ protocol: /^rediss?$/, error: 'must be a redis:// or rediss:// URL' }).optional(),
  GF_TRUST_PROXY: booleanFromEnv.default(false),
  GF_ADMIN_TOKEN: z.string().min(32, 'must be at least 32 characters').optional(),
  GF_ADMIN_WALLETS: z
    .string()
    .default('')
    .transform((value) => value.split(',').map((part) => part.trim()).filter((part) => part !== ''))
    .pipe(z.array(address)),
  GF_STABLE_TOKEN_ADDRESS: address.optional(),
  GF_STABLE_TOKEN_SYMBOL: z.string().min(1).max(11).default('USDC'),
  GF_STABLE_TOKEN_DECIMALS: z.coerce.number().int().min(6, 'must be at least 6 (micro-USD precision)').max(36).default(6),
  GF_WEI_PER_USD: z.string().regex(/^[1-9]\d{0,30}$/, 'must be a positive integer of wei per USD').default('333333333333333'),
  GF_BANNED_IMAGES: z
    .string()
    .default('')
    .transform((text) => text.split(',').map((s) => s.trim()).filter(Boolean))
    .refine((patterns) => patterns.every((p) => parseBannedImagePattern(p) !== null), {
      message: 'must be comma-separated image repositories such as acme/tool or acme/* (no tag, digest or bare *)',
    }),
  GF_RPC_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) JSON-RPC URL' }).optional(),
  // Read first (see loadConfig): the file fills the chain variables that are not set.
  GF_CHAIN_FILE: z.string().min(1).optional(),
  GF_ESCROW_ADDRESS: address.optional(),
  GF_OPERATOR_PRIVATE_KEY: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be 0x followed by 64 hex digits').optional(),
  GF_CONFIRMATIONS: z.coerce.number().int().min(1).max(1000).default(1),
  GF_CHAIN_HEALTH_MS: z.coerce.number().int().min(100).default(5_000),
  GF_ESCROW_SWEEP_MS: z.coerce.number().int().min(100).default(5_000),
  GF_ESCROW_START_BLOCK: z.coerce.number().int().min(0).default(0),
  GF_OFFER_INDEX_REFRESH_MS: z.coerce.number().int().min(100).default(30_000),
  GF_HEARTBEAT_SECONDS: z.coerce.number().int().min(1).max(300).default(10),
  // These two add up to the requeue time agents get in `welcome` (`lostAfterSeconds`, at most ten days).
  GF_MACHINE_OFFLINE_SECONDS: z.coerce.number().int().min(1).max(86_400).default(DEFAULT_MACHINE_OFFLINE_SECONDS),
  GF_MACHINE_LOST_GRACE_SECONDS: z.coerce.number().int().min(0).max(7 * 86_400).default(DEFAULT_MACHINE_LOST_GRACE_SECONDS),
  GF_ASSIGN_TIMEOUT_SECONDS: z.coerce.number().int().min(1).default(60),
  GF_MATCH_INTERVAL_MS: z.coerce.number().int().min(10).default(1_000),
  GF_MATCHER: booleanFromEnv.default(true),
  GF_EXECUTION_SWEEP_MS: z.coerce.number().int().min(10).default(5_000),
  GF_LOG_CAP_BYTES: z.coerce.number().int().min(1024).default(100 * 1024 * 1024),
  GF_ARTIFACT_STORE: z.enum(['fs', 's3']).default('fs'),
  GF_ARTIFACT_DIR: z.string().min(1).optional(),
  GF_S3_ENDPOINT: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL of the S3-compatible endpoint' }).optional(),
  GF_S3_BUCKET: z.string().regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be an S3 bucket name (3 to 63 lower-case letters, digits, dots or dashes)').optional(),
  GF_S3_REGION: z.string().min(1).default('us-east-1'),
  GF_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  GF_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  GF_S3_FORCE_PATH_STYLE: booleanFromEnv.default(false),
  GF_ARTIFACT_TTL_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  // As long as the job's log artifact lives by default, so the lines and their durable copy go together.
  GF_LOG_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  GF_MAX_INPUT_BYTES: z.coerce.number().int().min(1).default(1024 * 1024 * 1024),
  GF_INPUT_QUOTA_BYTES: z.coerce.number().int().min(1).default(10 * 1024 ** 3),
  GF_MAX_CONNECTIONS: z.coerce.number().int().min(1).default(10_000),
  // Half of GF_MAX_CONNECTIONS unless set (see loadConfig): the agents' share customers never take.
  GF_AGENT_RESERVED_CONNECTIONS: z.coerce.number().int().min(0).optional(),
  GF_MAX_PENDING_UPGRADES: z.coerce.number().int().min(1).default(256),
  GF_AGENT_HANDSHAKE_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  GF_LOG_STREAMS_PER_ACCOUNT: z.coerce.number().int().min(1).default(20),
  GF_API_KEYS_PER_ACCOUNT: z.coerce.number().int().min(1).default(25),
  GF_SESSIONS_PER_ACCOUNT: z.coerce.number().int().min(1).default(10),
  GF_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(1_000).default(20_000),
  GF_UNFUNDED_JOB_TTL_SECONDS: z.coerce.number().int().min(1).max(30 * 86_400).default(86_400),
  GF_CANARY_IMAGE: z
    .string()
    .regex(/^[^@\s]+@sha256:[a-f0-9]{64}$/, 'must be the canary image pinned by digest: <repository>@sha256:<64 hex>')
    .optional(),
  // The built-in shell templates' image (npm start: the local busybox image); unset, they are not offered.
  GF_SHELL_IMAGE: z
    .string()
    .regex(/^[^@\s]+@sha256:[a-f0-9]{64}$/, 'must be an image pinned by digest: <repository>@sha256:<64 hex>')
    .optional(),
  // A working day: the dashboard asks for a new signature after it.
  GF_SESSION_TTL_SECONDS: z.coerce.number().int().min(60).max(30 * 86_400).default(28_800),
  GF_WEB_DIR: z.string().min(1).optional(),
  GF_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Off by default: replicas and test control planes share hosts, and a fixed port would collide.
  GF_METRICS_LISTEN: z
    .string()
    .default('off')
    .transform((text, ctx): ListenSetting => {
      const parsed = parseListenSetting(text);
      if (parsed !== null) return parsed;
      ctx.addIssue({ code: 'custom', message: LISTEN_SETTING_HINT });
      return z.NEVER;
    }),
  GF_METRICS_TOKEN: z.string().min(32, 'must be at least 32 characters').optional(),
});

/** What each variable means, for docs/deploy/configuration.md (`npm run docs`). */
export const ENV_DOCS: Record<keyof z.input<typeof envSchema>, SettingDoc> = {
  PORT: { description: 'HTTP port (`0`: any free port)' },
  HOST: { description: 'address to listen on' },
  DATABASE_URL: { description: 'PostgreSQL URL; unset means the embedded PGlite in `$GF_DATA_DIR/db`' },
  GF_DATA_DIR: { description: 'local state: embedded database, the running server\'s state file, the local chain (`anvil-state.json`, `chain.json`)' },
  GF_MIGRATE_ON_START: { description: 'apply pending migrations at start; a deployment sets `false` and runs `migrate` once per release (a start with pending migrations then refuses to serve, saying to run it)' },
  GF_ENVIRONMENT: { description: '`mainnet` (accepts `gf_live_` keys only), `testnet` or `local` (`gf_test_` keys only)' },
  GF_ALLOW_SIMULATED_MACHINES: {
    default: '`true` on `local`, else `false`',
    description: 'list and match machines whose agent runs in simulated mode (no GPU proven; their offers say `simulated: true`, `GET /v1` says `simulatedMachines.allowed`); refused on `mainnet`; off, a simulated agent\'s enrollment is refused naming this variable',
  },
  GF_CHAIN_ID: { description: 'chain id reported by the API' },
  GF_PUBLIC_URL: {
    default: '`http://HOST:PORT`',
    description: 'base of the links in responses (job links, `GET /v1` links, signed artifact URLs, the agents\' input routes); unset with `PORT=0`, the port the server bound. With `https:` the dashboard\'s cookies are `__Host-` cookies (Secure, Path=/, no Domain); on `mainnet` it must be `https:` unless it names a loopback address',
  },
  GF_PLATFORM_FEE_BPS: { description: 'platform fee in basis points' },
  GF_RATE_LIMIT_STORE: {
    default: '`redis` with `GF_REDIS_URL`, else `memory`',
    description: '`memory` counts limits per process; `redis` shares them between replicas through `GF_REDIS_URL` (requests never write PostgreSQL; docs/decisions.md, "One customer cannot starve the service")',
  },
  GF_REDIS_URL: { description: '`redis://[user:password@]host:port[/db]` or `rediss://…`: the Redis server of shared rate limits; a start fails when it does not answer, and while it is away each replica counts in memory' },
  GF_TRUST_PROXY: { description: 'take the client address from `X-Forwarded-For` (behind a load balancer)' },
  GF_ADMIN_TOKEN: { default: 'unset (`npm start` makes one)', description: 'bearer token of the admin API `/admin/v1`; unset disables it' },
  GF_ADMIN_WALLETS: { description: 'comma-separated wallet addresses that sign in to the admin area `/admin/`' },
  GF_STABLE_TOKEN_ADDRESS: { default: 'unset (`npm start`: the test tUSDC)', description: 'the stablecoin\'s address, listed in `/v1/pricing` payment assets' },
  GF_STABLE_TOKEN_SYMBOL: { description: 'the stablecoin\'s symbol' },
  GF_STABLE_TOKEN_DECIMALS: { description: 'the stablecoin\'s decimals' },
  GF_WEI_PER_USD: { description: 'the ETH price source: wei per USD, frozen into each ETH job at creation' },
  GF_BANNED_IMAGES: { description: 'comma-separated image repositories refused besides the built-in miners and crackers (`acme/*` wildcard)' },
  GF_RPC_URL: { default: 'unset (`npm start` runs anvil)', description: 'the chain\'s JSON-RPC URL; funding needs it and `GF_ESCROW_ADDRESS`' },
  GF_CHAIN_FILE: { description: 'a deployment file (`npm run deploy -- --out FILE`, or `npm start`\'s `.gpufarm/chain.json`) that fills the chain variables not set otherwise (`GF_RPC_URL`, `GF_ESCROW_ADDRESS`, `GF_ESCROW_START_BLOCK`, `GF_CHAIN_ID`, `GF_STABLE_TOKEN_*`); a missing or malformed file stops the start naming it' },
  GF_ESCROW_ADDRESS: { default: 'unset (`npm start` deploys one)', description: 'the escrow contract jobs are funded on' },
  GF_OPERATOR_PRIVATE_KEY: { default: 'unset (`npm start`: anvil dev account 0)', description: 'the operator\'s key (authorize refunds, complete, release); never logged' },
  GF_CONFIRMATIONS: { description: 'blocks a funding transaction needs before fund-confirm accepts it (1: mined)' },
  GF_CHAIN_HEALTH_MS: { default: '`5000` (`npm start`: `2000`)', description: 'how often the chain and the escrow are probed in the background' },
  GF_ESCROW_SWEEP_MS: { default: '`5000` (`npm start`: `2000`)', description: 'period of the escrow worker: refunds to authorize, escrow events, releases due, reorg checks' },
  GF_ESCROW_START_BLOCK: { description: 'the first block the escrow event scan reads (the escrow\'s deployment block)' },
  GF_OFFER_INDEX_REFRESH_MS: { description: 'full reload period of the in-process offer index (it also reloads on every fleet change)' },
  GF_HEARTBEAT_SECONDS: { description: 'how often agents send heartbeats (told in `welcome`)' },
  GF_MACHINE_OFFLINE_SECONDS: { description: 'a machine not heard from this long is offline and offers nothing' },
  GF_MACHINE_LOST_GRACE_SECONDS: { description: 'an offline machine\'s running jobs are requeued after this, unless it comes back; agents are told the sum with `GF_MACHINE_OFFLINE_SECONDS` (`lostAfterSeconds` in `welcome`) and stop their jobs before it' },
  GF_ASSIGN_TIMEOUT_SECONDS: { description: 'an assignment not accepted within this goes back to the queue; the machine is excluded for the job' },
  GF_MATCH_INTERVAL_MS: { description: 'the matcher\'s tick (it also wakes on every queued job and fleet change)' },
  GF_MATCHER: { description: 'whether this process runs the matcher; with replicas any number may (they claim rows), `false` leaves matching to the others' },
  GF_EXECUTION_SWEEP_MS: { description: 'period of the liveness sweep, settlement retries, artifact expiry and unfunded job expiry' },
  GF_LOG_CAP_BYTES: { description: 'bytes of log text stored per job; a system line says when it is reached' },
  GF_ARTIFACT_STORE: { description: 'where artifact bytes live: `fs` (`GF_ARTIFACT_DIR`, embedded) or `s3` (an S3-compatible bucket; agents then upload straight to the bucket with presigned multipart URLs, the control plane reading each upload back to check its SHA-256, and downloads are presigned GETs of the bucket)' },
  GF_ARTIFACT_DIR: { default: '`$GF_DATA_DIR/artifacts`', description: 'the filesystem artifact store (content-addressed)' },
  GF_S3_ENDPOINT: { default: 'unset: AWS', description: 'the S3-compatible endpoint, e.g. `http://127.0.0.1:4568`' },
  GF_S3_BUCKET: { default: 'unset (required with `s3`)', description: 'the bucket; objects are `blobs/<sha256>`, uploads in progress `tmp/<uuid>`' },
  GF_S3_REGION: { description: 'the bucket\'s region (request signing)' },
  GF_S3_ACCESS_KEY_ID: { default: 'unset: the AWS SDK\'s own credential chain', description: 'static credentials with `GF_S3_SECRET_ACCESS_KEY`, both or neither' },
  GF_S3_SECRET_ACCESS_KEY: { default: 'unset: the AWS SDK\'s own credential chain', description: 'the secret of `GF_S3_ACCESS_KEY_ID`; never logged' },
  GF_S3_FORCE_PATH_STYLE: { description: '`<endpoint>/<bucket>/<key>` URLs instead of `<bucket>.<endpoint>`; most self-hosted servers need `true`' },
  GF_ARTIFACT_TTL_DAYS: { description: 'artifacts expire after this (downloads then answer 410 `gone`)' },
  GF_LOG_RETENTION_DAYS: { description: 'a job\'s log lines (`GET /v1/jobs/:id/logs`) are dropped, a whole day\'s partition at once, this many days after the end of the UTC day the job was created; the job, its billing and escrow records and its log artifact stay' },
  GF_MAX_INPUT_BYTES: { description: 'largest input upload (`POST /v1/artifacts`)' },
  GF_INPUT_QUOTA_BYTES: { description: 'bytes of unexpired input uploads one account may keep; past it uploads are 413' },
  GF_MAX_CONNECTIONS: { description: 'open connections at once (agent links included); more are closed at once' },
  GF_AGENT_RESERVED_CONNECTIONS: { default: 'half of `GF_MAX_CONNECTIONS`', description: 'connections customers never hold (kept for agent links and machine-token calls); a customer call past `GF_MAX_CONNECTIONS` minus this is 503 `unavailable` with `Retry-After`' },
  GF_MAX_PENDING_UPGRADES: { description: 'agent WebSocket upgrades whose machine token is being checked at once; more are answered 503 with `Retry-After`' },
  GF_AGENT_HANDSHAKE_MS: { description: 'an agent upgrade must be authenticated, and its link send `hello`, within this (else 503, or close 4408)' },
  GF_LOG_STREAMS_PER_ACCOUNT: { description: 'live log streams one account keeps open at once per process, over all its keys and sessions (besides 5 per key); more are 429' },
  GF_API_KEYS_PER_ACCOUNT: { description: 'API keys (not revoked) one account may hold; creating one more is 409 `conflict`' },
  GF_SESSIONS_PER_ACCOUNT: { description: 'dashboard sessions one account keeps; a sign-in past it signs the oldest browser out' },
  GF_HEADERS_TIMEOUT_MS: { description: 'a request head must arrive within this (408 `request_timeout`)' },
  GF_UNFUNDED_JOB_TTL_SECONDS: { description: 'a job still `CREATED` (not funded) this long after its creation becomes `EXPIRED`' },
  GF_CANARY_IMAGE: { default: 'unset (`npm start`: the local canary)', description: 'the service\'s canary image, `repo@sha256:…`; a job running it with `[\'sha256-chain\', \'<n>\']` and `deterministic: true` is recomputed and can reach `RESULT_VERIFIED`; `GET /v1` shows it as `canary` (`image`, `repository`, `digest`, `command`). Unset, the control plane says at start that no job reaches `RESULT_VERIFIED` and `canary` is `null`; machines are verified by the GPU challenge either way' },
  GF_SHELL_IMAGE: { default: 'unset (`npm start`: the local busybox image)', description: 'an image with a POSIX shell and the usual tools, `repo@sha256:…`, that the built-in shell templates (`shell-script`, `machine-report`, `progress-loop`) run; unset, `GET /v1/templates` offers the canary alone (when `GF_CANARY_IMAGE` is set)' },
  GF_SESSION_TTL_SECONDS: { description: 'how long a dashboard sign-in lasts (the session cookie\'s `Max-Age`)' },
  GF_WEB_DIR: { default: '`web/dist` beside `control-plane/` (`/app/web` in the image)', description: 'the built dashboard (`npm run build:web`, which `npm start`, `npm run cluster` and `npm test` run: it builds only when `web/dist` is missing or stale) served at `/dashboard/`; missing, `/dashboard/` answers 503 saying to build it' },
  GF_LOG_LEVEL: { description: "log level of the control plane's log: pino JSON lines on stdout (requests with `requestId`, background loops with `loop`, job and machine lines with `jobId`/`assignmentId`/`machineId`, errors as `err`); `npm start` prints only warnings and errors unless set" },
  GF_METRICS_LISTEN: { description: '`host:port` of a listener serving only Prometheus `/metrics`, without a credential (bind a private address), or `off`; see [Metrics and health](metrics.md)' },
  GF_METRICS_TOKEN: { description: '`/metrics` is also served on the API port to `Authorization: Bearer <token>`; never logged' },
};

/** Variables whose values never appear in messages, even when malformed. */
const SECRET_VARIABLES = new Set(['GF_OPERATOR_PRIVATE_KEY', 'GF_ADMIN_TOKEN', 'DATABASE_URL', 'GF_S3_SECRET_ACCESS_KEY', 'GF_METRICS_TOKEN', 'GF_REDIS_URL']);

export type Env = z.infer<typeof envSchema>;

/** A secret from the environment: it prints and serialises as `[redacted]`; `reveal()` gives the value. */
export class Secret {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  reveal(): string {
    return this.#value;
  }
  toString(): string {
    return '[redacted]';
  }
  toJSON(): string {
    return '[redacted]';
  }
  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return '[redacted]';
  }
}

/** The escrow deployment: set when both `GF_RPC_URL` and `GF_ESCROW_ADDRESS` are. */
export interface ChainConfig {
  rpcUrl: string;
  escrowAddress: `0x${string}`;
  /** The operator's key (completeJob, authorizeRefund, release); never logged. */
  operatorKey: Secret | null;
  confirmations: number;
  healthIntervalMs: number;
  sweepIntervalMs: number;
  /** The first block the escrow event scan reads (the escrow's deployment block). */
  startBlock: number;
}

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  dataDir: string;
  /** Apply pending migrations at start; when false, a start with any pending refuses to serve. */
  migrateOnStart: boolean;
  environment: (typeof ENVIRONMENTS)[number];
  chainId: number;
  /** The base of the links in responses (signed artifact URLs, job links, the agent's input routes). */
  publicUrl: string;
  /**
   * GF_PUBLIC_URL is unset: `publicUrl` is `http://HOST:PORT`, and with PORT=0 the server puts
   * the port it bound in once it listens.
   */
  publicUrlFollowsPort: boolean;
  platformFeeBps: number;
  /**
   * Where rate-limit counters live: `memory` counts per process (the default); `redis` shares them
   * between replicas through `redisUrl` (the default when `GF_REDIS_URL` is set).
   */
  rateLimitStore: 'memory' | 'redis';
  /** `GF_REDIS_URL`: the Redis server of shared rate limits; null when unset. It may hold a password. */
  redisUrl: Secret | null;
  trustProxy: boolean;
  /** Open connections the server takes at once (agent links included); more are closed at once. */
  maxConnections: number;
  /**
   * Of `maxConnections`, the share customers never hold: agent links and machine requests may use
   * it, anything else is refused 503 once `maxConnections - agentReservedConnections` are customers'.
   */
  agentReservedConnections: number;
  /** What one account may hold at once, across all its API keys and dashboard sessions. */
  accountLimits: AccountLimits;
  /** A request head (line and headers) must arrive within this; else 408 `request_timeout`. */
  headersTimeoutMs: number;
  adminToken: string | undefined;
  /** Wallets (lower case) that sign in to the admin area. */
  adminWallets: readonly string[];
  stableToken: { address: string; symbol: string; decimals: number } | null;
  /** The fixed ETH price source: wei per USD, frozen into each ETH job at creation. */
  weiPerUsd: bigint;
  /** Image repositories refused besides the built-in miners and crackers (`*` suffix wildcard). */
  bannedImages: string[];
  offerIndexRefreshMs: number;
  /** A job still CREATED (not funded) this long after its creation expires. */
  unfundedJobTtlSeconds: number;
  /** null: funding is unavailable (`fundingUnavailable.code` `escrow_not_deployed`). */
  chain: ChainConfig | null;
  execution: ExecutionConfig;
  web: WebConfig;
  logLevel: Env['GF_LOG_LEVEL'];
  metrics: MetricsConfig;
}

/** Per-account caps, so that many keys or sessions do not multiply one account's share. */
export interface AccountLimits {
  /** Live log streams open at once in one process (besides the per-key cap of 5). */
  logStreams: number;
  /** API keys not revoked; creating one more is 409 `conflict`. */
  apiKeys: number;
  /** Dashboard sessions not expired; a sign-in past it ends the oldest. */
  sessions: number;
}

/** Prometheus `/metrics`: on a listener of its own, and/or on the API port behind a token. */
export interface MetricsConfig {
  /** `GF_METRICS_LISTEN`: an address serving only `/metrics` without a credential; null: none. */
  listen: { host: string; port: number } | null;
  /** `GF_METRICS_TOKEN`: `/metrics` on the API port for `Authorization: Bearer <token>`; null: not served there. */
  token: Secret | null;
}

/** The customer dashboard: its built files and its sign-in sessions. */
export interface WebConfig {
  /** The built web app (`web/dist`, or `GF_WEB_DIR`); absent: `/dashboard/` answers 503. */
  dir: string;
  /** How long a dashboard session lasts after sign-in. */
  sessionTtlSeconds: number;
}

/** Machines, assignments, logs and artifacts (the Execution slice). */
export interface ExecutionConfig {
  /** Seconds between an agent's heartbeats (told in `welcome`). */
  heartbeatSeconds: number;
  /** A machine not heard from this long is offline and offers nothing. */
  machineOfflineSeconds: number;
  /**
   * An offline machine's jobs are requeued after this long unless it comes back. With
   * `machineOfflineSeconds` it makes the time agents are told in `welcome` (`lostAfterSeconds`).
   */
  machineLostGraceSeconds: number;
  /** An offered assignment not accepted within this is taken back and the machine excluded. */
  assignTimeoutSeconds: number;
  matchIntervalMs: number;
  /** Whether this process runs the matcher loop (replicas may leave it to others). */
  runMatcher: boolean;
  sweepIntervalMs: number;
  /** Bytes of log text stored per job; a system line says when it is reached. */
  logCapBytes: number;
  /** The filesystem artifact store's directory (used when `s3` is null). */
  artifactDir: string;
  /** The S3-compatible artifact store (`GF_ARTIFACT_STORE=s3`); null: the filesystem store. */
  s3: S3StoreConfig | null;
  artifactTtlDays: number;
  /** Days a job's log lines stay queryable, counted from the end of the day the job was created. */
  logRetentionDays: number;
  /** Largest input upload (`POST /v1/artifacts`). */
  maxInputBytes: number;
  /** Bytes of unexpired inputs one account may keep stored. */
  inputQuotaBytes: number;
  /** The service's canary image pinned by digest; null: no job reaches RESULT_VERIFIED. */
  canaryImage: { repository: string; digest: string } | null;
  /** The image the built-in shell templates run, `repo@sha256:…` (a POSIX shell and the usual tools); null: those templates are not offered. */
  shellImage: string | null;
  /**
   * Whether machines whose agent runs in simulated mode (no GPU proven) are enrolled, verified,
   * listed and matched (`GF_ALLOW_SIMULATED_MACHINES`; default true on `local` only, never on mainnet).
   */
  allowSimulatedMachines: boolean;
  /** Agent WebSocket upgrades whose machine token is still being checked; more are refused 503. */
  maxPendingUpgrades: number;
  /** An agent upgrade must be authenticated, and its link send `hello`, within this. */
  agentHandshakeMs: number;
}

/** An S3-compatible bucket holding the artifact bytes. */
export interface S3StoreConfig {
  /** null: AWS's own endpoint for `region`. */
  endpoint: string | null;
  bucket: string;
  region: string;
  /** null: the SDK's default credential chain (instance role, AWS_* variables, profile). */
  credentials: { accessKeyId: string; secretAccessKey: Secret } | null;
  /** `<endpoint>/<bucket>/<key>` rather than `<bucket>.<endpoint>/<key>` (most self-hosted servers). */
  forcePathStyle: boolean;
}

/** One or more environment variables are malformed; `problems` names each with its value. */
export class ConfigError extends GpufarmError<'invalid_config'> {
  constructor(readonly problems: string[]) {
    super('invalid_config', `invalid configuration; fix these environment variables and start again:\n${problems.map((p) => `  ${p}`).join('\n')}`);
  }
}

/** `http://HOST:PORT` as clients reach it: a wildcard address is reached as `localhost`. */
export function defaultPublicUrl(host: string, port: number): string {
  const publicHost = host === '0.0.0.0' || host === '::' ? 'localhost' : host;
  return `http://${publicHost}:${port}`;
}

/** `localhost`, 127.0.0.0/8 or ::1: a URL on such a host is reached from this machine only. */
function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(hostname) || hostname === '[::1]';
}

/**
 * `GF_CHAIN_FILE`'s deployment fills the chain variables (`GF_RPC_URL`, `GF_ESCROW_ADDRESS`,
 * `GF_ESCROW_START_BLOCK`, `GF_CHAIN_ID`, `GF_STABLE_TOKEN_*`) that are not set; a set one wins.
 */
function withChainFile(present: Record<string, string>): Record<string, string> {
  const file = envSchema.shape.GF_CHAIN_FILE.parse(present.GF_CHAIN_FILE);
  if (file === undefined) return present;
  try {
    return { ...deploymentEnv(readDeploymentFile(file)), ...present };
  } catch (err) {
    throw new ConfigError([`GF_CHAIN_FILE: ${errorText(err)}`]);
  }
}

/** Reads and validates the configuration; a bad value throws a ConfigError naming the variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // An empty variable means unset, as in most shells' `VAR= cmd`.
  const present = withChainFile(Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '')));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const shown = (name: string) => (SECRET_VARIABLES.has(name) ? '[redacted]' : JSON.stringify(present[name] ?? null));
    throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message} (got ${shown(String(issue.path[0]))})`));
  }
  const e = parsed.data;
  const s3Problems = [
    ...(e.GF_ARTIFACT_STORE === 's3' && !e.GF_S3_BUCKET ? ['GF_S3_BUCKET: must be set when GF_ARTIFACT_STORE is s3 (got null)'] : []),
    ...(!e.GF_S3_ACCESS_KEY_ID !== !e.GF_S3_SECRET_ACCESS_KEY ? ['GF_S3_ACCESS_KEY_ID: must be set together with GF_S3_SECRET_ACCESS_KEY, or neither (the SDK then finds credentials itself)'] : []),
  ];
  const publicUrl = (e.GF_PUBLIC_URL ?? defaultPublicUrl(e.HOST, e.PORT)).replace(/\/$/, '');
  const agentReservedConnections = e.GF_AGENT_RESERVED_CONNECTIONS ?? Math.floor(e.GF_MAX_CONNECTIONS / 2);
  const problems = [
    ...s3Problems,
    ...(e.GF_RATE_LIMIT_STORE === 'redis' && !e.GF_REDIS_URL ? ['GF_REDIS_URL: must be set when GF_RATE_LIMIT_STORE is redis (got null)'] : []),
    ...(agentReservedConnections >= e.GF_MAX_CONNECTIONS
      ? [`GF_AGENT_RESERVED_CONNECTIONS: must be less than GF_MAX_CONNECTIONS (${e.GF_MAX_CONNECTIONS}), so customers keep a share (got ${agentReservedConnections})`]
      : []),
  ];
  if (problems.length > 0) throw new ConfigError(problems);
  const liveProblems = e.GF_ENVIRONMENT !== 'mainnet' ? [] : [
    // Live keys mean paying customers: a machine nobody proved has GPUs is never offered to them.
    ...(e.GF_ALLOW_SIMULATED_MACHINES === true ? ['GF_ALLOW_SIMULATED_MACHINES: must not be true when GF_ENVIRONMENT is mainnet (live keys): simulated machines are for local and test deployments (got "true")'] : []),
    // The session cookie is Secure (and __Host-) only over https: plain http is for this host alone.
    ...(!publicUrl.startsWith('https:') && !(URL.canParse(publicUrl) && isLoopbackHost(new URL(publicUrl).hostname))
      ? [`GF_PUBLIC_URL: must be an https URL when GF_ENVIRONMENT is mainnet (sessions and keys travel over it), or a loopback address (got ${JSON.stringify(publicUrl)})`]
      : []),
  ];
  if (liveProblems.length > 0) throw new ConfigError(liveProblems);
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.GF_DATA_DIR,
    migrateOnStart: e.GF_MIGRATE_ON_START,
    environment: e.GF_ENVIRONMENT,
    chainId: e.GF_CHAIN_ID,
    publicUrl,
    publicUrlFollowsPort: e.GF_PUBLIC_URL === undefined,
    platformFeeBps: e.GF_PLATFORM_FEE_BPS,
    // Requests never write the database: limits are shared through Redis when one is named, else per process.
    rateLimitStore: e.GF_RATE_LIMIT_STORE ?? (e.GF_REDIS_URL ? 'redis' : 'memory'),
    redisUrl: e.GF_REDIS_URL ? new Secret(e.GF_REDIS_URL) : null,
    trustProxy: e.GF_TRUST_PROXY,
    maxConnections: e.GF_MAX_CONNECTIONS,
    agentReservedConnections,
    accountLimits: { logStreams: e.GF_LOG_STREAMS_PER_ACCOUNT, apiKeys: e.GF_API_KEYS_PER_ACCOUNT, sessions: e.GF_SESSIONS_PER_ACCOUNT },
    headersTimeoutMs: e.GF_HEADERS_TIMEOUT_MS,
    adminToken: e.GF_ADMIN_TOKEN,
    adminWallets: [...new Set(e.GF_ADMIN_WALLETS.map((wallet) => wallet.toLowerCase()))],
    stableToken: e.GF_STABLE_TOKEN_ADDRESS
      ? { address: e.GF_STABLE_TOKEN_ADDRESS.toLowerCase(), symbol: e.GF_STABLE_TOKEN_SYMBOL, decimals: e.GF_STABLE_TOKEN_DECIMALS }
      : null,
    weiPerUsd: BigInt(e.GF_WEI_PER_USD),
    bannedImages: e.GF_BANNED_IMAGES,
    offerIndexRefreshMs: e.GF_OFFER_INDEX_REFRESH_MS,
    unfundedJobTtlSeconds: e.GF_UNFUNDED_JOB_TTL_SECONDS,
    chain:
      e.GF_RPC_URL && e.GF_ESCROW_ADDRESS
        ? {
            rpcUrl: e.GF_RPC_URL,
            escrowAddress: e.GF_ESCROW_ADDRESS.toLowerCase() as `0x${string}`,
            operatorKey: e.GF_OPERATOR_PRIVATE_KEY ? new Secret(e.GF_OPERATOR_PRIVATE_KEY) : null,
            confirmations: e.GF_CONFIRMATIONS,
            healthIntervalMs: e.GF_CHAIN_HEALTH_MS,
            sweepIntervalMs: e.GF_ESCROW_SWEEP_MS,
            startBlock: e.GF_ESCROW_START_BLOCK,
          }
        : null,
    execution: {
      heartbeatSeconds: e.GF_HEARTBEAT_SECONDS,
      machineOfflineSeconds: e.GF_MACHINE_OFFLINE_SECONDS,
      machineLostGraceSeconds: e.GF_MACHINE_LOST_GRACE_SECONDS,
      assignTimeoutSeconds: e.GF_ASSIGN_TIMEOUT_SECONDS,
      matchIntervalMs: e.GF_MATCH_INTERVAL_MS,
      runMatcher: e.GF_MATCHER,
      sweepIntervalMs: e.GF_EXECUTION_SWEEP_MS,
      logCapBytes: e.GF_LOG_CAP_BYTES,
      artifactDir: e.GF_ARTIFACT_DIR ?? `${e.GF_DATA_DIR}/artifacts`,
      s3:
        e.GF_ARTIFACT_STORE === 's3' && e.GF_S3_BUCKET
          ? {
              endpoint: e.GF_S3_ENDPOINT ?? null,
              bucket: e.GF_S3_BUCKET,
              region: e.GF_S3_REGION,
              credentials: e.GF_S3_ACCESS_KEY_ID && e.GF_S3_SECRET_ACCESS_KEY ? { accessKeyId: e.GF_S3_ACCESS_KEY_ID, secretAccessKey: new Secret(e.GF_S3_SECRET_ACCESS_KEY) } : null,
              forcePathStyle: e.GF_S3_FORCE_PATH_STYLE,
            }
          : null,
      artifactTtlDays: e.GF_ARTIFACT_TTL_DAYS,
      logRetentionDays: e.GF_LOG_RETENTION_DAYS,
      maxInputBytes: e.GF_MAX_INPUT_BYTES,
      inputQuotaBytes: e.GF_INPUT_QUOTA_BYTES,
      canaryImage: e.GF_CANARY_IMAGE
        ? { repository: e.GF_CANARY_IMAGE.slice(0, e.GF_CANARY_IMAGE.indexOf('@')), digest: e.GF_CANARY_IMAGE.slice(e.GF_CANARY_IMAGE.indexOf('@') + 1) }
        : null,
      shellImage: e.GF_SHELL_IMAGE ?? null,
      allowSimulatedMachines: e.GF_ALLOW_SIMULATED_MACHINES ?? e.GF_ENVIRONMENT === 'local',
      maxPendingUpgrades: e.GF_MAX_PENDING_UPGRADES,
      agentHandshakeMs: e.GF_AGENT_HANDSHAKE_MS,
    },
    web: { dir: e.GF_WEB_DIR ?? WEB_DIST_DIR, sessionTtlSeconds: e.GF_SESSION_TTL_SECONDS },
    logLevel: e.GF_LOG_LEVEL,
    metrics: { listen: e.GF_METRICS_LISTEN === 'off' ? null : e.GF_METRICS_LISTEN, token: e.GF_METRICS_TOKEN ? new Secret(e.GF_METRICS_TOKEN) : null },
  };
}
