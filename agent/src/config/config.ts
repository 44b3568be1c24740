import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';
import { GpufarmError, LISTEN_SETTING_HINT, LOG_ARTIFACT_MAX_BYTES, parseListenSetting } from '@gpufarm/shared';
import { parseSimulatedGpus, SimulatedGpuSpecError } from '../inventory/simulated.js';
import { LOG_ARTIFACT_MARGIN_BYTES, LOG_KEEP_BYTES } from '../runtime/log-file.js';

/**
 * The agent's settings: a TOML (or `.json`) file, then `GF_AGENT_*` environment variables over
 * it, then command-line flags over both. File keys are snake_case (`state_dir`), variables are
 * the same upper-cased with the prefix (`GF_AGENT_STATE_DIR`). Every value is validated; an
 * error names the setting and where it came from.
 */
const int = (min: number, max: number) =>
  z.coerce.number({ error: 'must be a whole number' }).int({ error: 'must be a whole number' }).min(min, { error: `must be at least ${min}` }).max(max, { error: `must be at most ${max}` });
const seconds = int;

export const agentConfigSchema = z.strictObject({
  /** Control-plane base URL; `enroll --server` stores it in the state dir, so it is rarely set here. */
  server: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as https://farm.example.com' }).nullable().default(null),
  /** Keys, machine token, log spill and status; mode 0700. */
  stateDir: z.string().min(1).default('/var/lib/gf-agent'),
  /** Job inputs and outputs (the runtime's); the disk checks and inventory measure its file system. */
  workDir: z.string().min(1).nullable().default(null),
  /** Simulated mode: `"2x h100-80gb-sxm"`. Empty or unset: real GPUs. */
  simulateGpus: z.string().nullable().default(null).refine((v) => {
    if (v === null || v.trim() === '') return true;
    try {
      parseSimulatedGpus(v);
      return true;
    } catch (err) {
      if (err instanceof SimulatedGpuSpecError) return false;
      throw err;
    }
  }, { error: 'must be COUNTx CLASS, such as "2x h100-80gb-sxm", with a class of the catalog' }),
  nvidiaSmi: z.string().min(1).default('nvidia-smi'),
  /**
   * Where the host's `/proc`, `/run` and library folders are read for the pre-offer checks (the
   * kernel module's version, the NVML libraries, NVSwitches, whether systemd runs): `/`, or the
   * host's root mounted into the agent's container (`/host`).
   */
  hostRoot: z.string().min(1).default('/'),
  /**
   * Where the kernel's `NVRM: Xid` lines are read from: `/dev/kmsg` (read from the start of the
   * ring buffer, then as lines arrive) or a text file that grows, one line per message; unset
   * (empty) to read none.
   */
  kernelLog: z.string().nullable().default('/dev/kmsg').transform((v) => (v === '' ? null : v)),
  /** Until the server's `welcome` says otherwise. */
  heartbeatIntervalSeconds: seconds(1, 300).default(10),
  /** How often the GPUs are re-read (driver, count, model changes). */
  inventoryIntervalSeconds: seconds(1, 3600).default(10),
  /** How often a passed GPU probe is repeated. */
  gpuProbeIntervalSeconds: seconds(10, 86_400).default(900),
  gpuProbeImage: z.string().min(1).default('nvidia/cuda:12.4.1-base-ubuntu22.04'),
  /**
   * A repository without a tag: the image the agent makes from the gpu-bench program in its own
   * package, tagged with the program's digest, on first use. With a tag or digest: an image of
   * the operator's, used as it is (never pulled).
   */
  benchmarkImage: z.string().min(1).default('gpufarm/gpu-bench'),
  /** Unacked log lines kept in memory per assignment before they spill to disk. */
  logMemoryBytes: int(64 * 1024, 1024 ** 3).default(8 * 1024 * 1024),
  reconnectInitialMs: int(10, 60_000).default(500),
  reconnectMaxMs: int(100, 600_000).default(30_000),
  /**
   * Bytes of a job's log kept at each end of its log artifact (the middle of a longer log is
   * dropped, and a line says so); both ends together stay under the server's limit.
   */
  jobLogKeepBytes: int(64 * 1024, Math.floor((LOG_ARTIFACT_MAX_BYTES - LOG_ARTIFACT_MARGIN_BYTES) / 2)).default(LOG_KEEP_BYTES),
  /**
   * At most this long without the control plane before running jobs stop (outputs kept).
   * Unset: as long as the control plane's `welcome` allows (its requeue time less the stop and
   * a margin; `link/contact-deadline.ts`), which a set value can only shorten.
   */
  partitionGraceSeconds: seconds(0, 86_400).nullable().default(null),
  /** Free bytes below which doctor warns and the agent refuses new work. */
  minFreeDiskBytes: int(0, Number.MAX_SAFE_INTEGER).default(20 * 1024 ** 3),
  /** The egress proxy image, pinned (`repo@sha256:…`): allowlist jobs need it; unset, they are refused. */
  /**
   * Prometheus `/metrics` (per-GPU gauges, containers, uploads), `host:port` or `off`. Loopback
   * by default: a node exporter's host scrapes it, nothing off the machine reaches it.
   */
  metricsListen: z.string().default('127.0.0.1:9464').refine((v) => parseListenSetting(v) !== null, { error: LISTEN_SETTING_HINT }),
  egressProxyImage: z.string().regex(/^[^@\s]+@sha256:[a-f0-9]{64}$/, { error: 'must be a pinned image reference such as registry/gpufarm/egress-proxy@sha256:<64 hex>' }).nullable().default(null),
});
export type AgentConfig = z.infer<typeof agentConfigSchema>;
export type AgentConfigKey = keyof AgentConfig;

const KEYS = Object.keys(agentConfigSchema.shape) as AgentConfigKey[];
const snake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
export const envName = (k: string) => `GF_AGENT_${snake(k).toUpperCase()}`;

/** Where the default configuration file lives. */
export const DEFAULT_CONFIG_PATH = '/etc/gf-agent/agent.toml';

/** A configuration problem; `message` lists every bad setting, one per line. */
export class ConfigError extends GpufarmError<'invalid_config'> {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('invalid_config', message, options);
  }
}

export interface LoadConfigOptions {
  /** An explicit file (`--config` or `GF_AGENT_CONFIG`): must exist. */
  path?: string | undefined;
  env?: NodeJS.ProcessEnv;
  /** Command-line values, camelCase keys, over everything else. */
  overrides?: Partial<Record<AgentConfigKey, unknown>>;
}

export function loadConfig(options: LoadConfigOptions = {}): AgentConfig & { source: string | null } {
  const env = options.env ?? process.env;
  const explicit = options.path ?? env.GF_AGENT_CONFIG;
  const path = explicit ?? (existsSync(DEFAULT_CONFIG_PATH) ? DEFAULT_CONFIG_PATH : null);
  const raw: Record<string, { value: unknown; from: string }> = {};
  const problems: string[] = [];

  if (path !== null) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new ConfigError(`config file ${path}: cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    let parsed: Record<string, unknown>;
    try {
      parsed = path.endsWith('.json') ? (JSON.parse(text) as Record<string, unknown>) : (parseToml(text) as Record<string, unknown>);
    } catch (err) {
      throw new ConfigError(`config file ${path}: not valid ${path.endsWith('.json') ? 'JSON' : 'TOML'}: ${(err as Error).message.split('\n')[0]}`);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new ConfigError(`config file ${path}: must be a table of settings`);
    for (const [fileKey, value] of Object.entries(parsed)) {
      const key = KEYS.find((k) => snake(k) === fileKey);
      if (!key) {
        problems.push(`config file ${path}: unknown setting "${fileKey}" (known: ${KEYS.map(snake).join(', ')})`);
        continue;
      }
      raw[key] = { value, from: `config file ${path}: ${fileKey}` };
    }
  }
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('GF_AGENT_') || name === 'GF_AGENT_CONFIG' || value === undefined) continue;
    const key = KEYS.find((k) => envName(k) === name);
    if (!key) {
      problems.push(`environment ${name}: unknown setting (known: ${KEYS.map(envName).join(', ')})`);
      continue;
    }
    raw[key] = { value: value === '' ? null : value, from: `environment ${name}` };
  }
  for (const [key, value] of Object.entries(options.overrides ?? {})) {
    if (value !== undefined) raw[key] = { value, from: `option --${snake(key).replace(/_/g, '-')}` };
  }

  const config: Record<string, unknown> = {};
  for (const key of KEYS) {
    const entry = raw[key];
    const result = agentConfigSchema.shape[key].safeParse(entry?.value);
    if (result.success) config[key] = result.data;
    else problems.push(`${entry?.from ?? key}: ${result.error.issues.map((i) => i.message).join('; ')}`);
  }
  if (problems.length > 0) throw new ConfigError(problems.join('\n'));
  const out = config as AgentConfig;
  if (out.reconnectMaxMs < out.reconnectInitialMs) throw new ConfigError(`reconnect_max_ms (${out.reconnectMaxMs}) must not be below reconnect_initial_ms (${out.reconnectInitialMs})`);
  return { ...out, source: path };
}

/** The work directory: `work_dir`, or `work/` under the state dir. */
export function workDirOf(config: AgentConfig): string {
  return config.workDir ?? join(config.stateDir, 'work');
}
