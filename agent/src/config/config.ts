import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';
import { errorText, GpufarmError, LISTEN_SETTING_HINT, LOG_ARTIFACT_MAX_BYTES, parseListenSetting, type SettingDoc } from '@gpufarm/shared';
import { parseSimulatedGpus, SimulatedGpuSpecError } from '../inventory/simulated.js';
import { LOG_ARTIFACT_MARGIN_BYTES, LOG_KEEP_BYTES } from '../runtime/log-file.js';
import { parseImageReference } from '../docker/image.js';

/**
 * The agent's settings: a TOML (or `.json`) file, then `GF_AGENT_*` environment variables over
 * it, then command-line flags over both. File keys are snake_case (`state_dir`), variables are
 * the same upper-cased with the prefix (`GF_AGENT_STATE_DIR`). Every value is validated; an
 * error names the setting and where it came from.
 */
const int = (min: number, max: number) =>
  z.coerce.number({ error: 'must be a whole number' }).int({ error: 'must be a whole number' }).min(min, { error: `must be at least ${min}` }).max(max, { error: `must be at most ${max}` });
const seconds = int;

/** A list of image references: an array in the file, comma- or space-separated in a variable. */
const imageList = z.preprocess(
  (v) => (v === null || v === undefined ? [] : typeof v === 'string' ? v.split(/[\s,]+/).filter((r) => r !== '') : v),
  z.array(
    z.string().min(1).max(512).refine((r) => {
      try {
        parseImageReference(r);
        return true;
      } catch {
        return false;
      }
    }, { error: 'must be image references such as registry.example.com/team/image:tag or …@sha256:<64 hex>' }),
  ).max(64, { error: 'must list at most 64 images' }),
);

/** The share of the disk holding Docker's images that the image cache takes when `image_cache_bytes` is unset. */
export const DEFAULT_IMAGE_CACHE_SHARE = 0.5;

/** Every setting with its default; `AGENT_SETTING_DOCS` says what each means (`npm run docs`). */
export const agentConfigSchema = z.strictObject({
  server: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL such as https://farm.example.com' }).nullable().default(null),
  stateDir: z.string().min(1).default('/var/lib/gf-agent'),
  workDir: z.string().min(1).nullable().default(null),
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
  hostRoot: z.string().min(1).default('/'),
  kernelLog: z.string().nullable().default('/dev/kmsg').transform((v) => (v === '' ? null : v)),
  heartbeatIntervalSeconds: seconds(1, 300).default(10),
  inventoryIntervalSeconds: seconds(1, 3600).default(10),
  gpuProbeIntervalSeconds: seconds(10, 86_400).default(900),
  gpuProbeImage: z.string().min(1).default('nvidia/cuda:12.4.1-base-ubuntu22.04'),
  benchmarkImage: z.string().min(1).default('gpufarm/gpu-bench'),
  logMemoryBytes: int(64 * 1024, 1024 ** 3).default(8 * 1024 * 1024),
  reconnectInitialMs: int(10, 60_000).default(500),
  reconnectMaxMs: int(100, 600_000).default(30_000),
  jobLogKeepBytes: int(64 * 1024, Math.floor((LOG_ARTIFACT_MAX_BYTES - LOG_ARTIFACT_MARGIN_BYTES) / 2)).default(LOG_KEEP_BYTES),
  partitionGraceSeconds: seconds(0, 86_400).nullable().default(null),
  minFreeDiskBytes: int(0, Number.MAX_SAFE_INTEGER).default(20 * 1024 ** 3),
  metricsListen: z.string().default('127.0.0.1:9464').refine((v) => parseListenSetting(v) !== null, { error: LISTEN_SETTING_HINT }),
  imageCacheBytes: int(0, Number.MAX_SAFE_INTEGER).nullable().default(null),
  prepullImages: imageList.default([]),
  egressProxyImage: z.string().regex(/^[^@\s]+@sha256:[a-f0-9]{64}$/, { error: 'must be a pinned image reference such as registry/gpufarm/egress-proxy@sha256:<64 hex>' }).nullable().default(null),
});
export type AgentConfig = z.infer<typeof agentConfigSchema>;
export type AgentConfigKey = keyof AgentConfig;

/** What each setting means, for docs/operators/configuration.md (`npm run docs`). */
export const AGENT_SETTING_DOCS: Record<keyof AgentConfig, SettingDoc> = {
  server: { default: 'from enrollment', description: 'control-plane base URL; `enroll --server` stores it in the state dir, so it is rarely set here' },
  stateDir: { description: 'machine token, key, status and log spill; mode 0700 (the .deb\'s unit sets `GF_AGENT_STATE_DIR`, which overrides the file)' },
  workDir: { default: '`<state_dir>/work`', description: 'job folders (inputs, the `/output` mount, the log artifact); the disk checks and the inventory measure its file system' },
  simulateGpus: { description: 'simulated mode on a machine without GPUs, such as `2x h100-80gb-sxm` (a class of the catalog); empty or unset: real GPUs' },
  nvidiaSmi: { description: 'the nvidia-smi executable' },
  hostRoot: { description: 'where the host\'s `/proc`, `/run` and library folders are read for the pre-offer checks (the kernel module\'s version, the NVML libraries, NVSwitches, whether systemd runs): `/`, or `/host` when the agent runs in a container with the host\'s root mounted there' },
  kernelLog: { description: 'where the kernel\'s `NVRM: Xid` lines are read from: `/dev/kmsg` (read from the start of the ring buffer, then as lines arrive) or a text file that grows, one line per message; empty to read none' },
  heartbeatIntervalSeconds: { description: 'until the control plane\'s `welcome` says otherwise' },
  inventoryIntervalSeconds: { description: 'how often the GPUs are re-read (driver, count, model changes)' },
  gpuProbeIntervalSeconds: { description: 'how often a passed GPU probe is repeated' },
  gpuProbeImage: { description: 'the image the GPU probe runs (never pulled by it)' },
  benchmarkImage: { description: 'a repository without a tag: the image the agent makes from the gpu-bench program in its own package on first use (tagged with the program\'s digest; no registry needed); with a tag or digest: an image of the operator\'s, used as it is (never pulled)' },
  logMemoryBytes: { description: 'unacked log lines kept in memory per assignment before they spill to disk' },
  reconnectInitialMs: { description: 'first reconnect delay (exponential backoff, full jitter)' },
  reconnectMaxMs: { description: 'longest reconnect delay; not below `reconnect_initial_ms`' },
  jobLogKeepBytes: { description: 'bytes of a job\'s log kept at each end of its log artifact (the middle of a longer log is dropped, and a line says so); both ends together stay under the server\'s limit' },
  partitionGraceSeconds: { description: 'at most this long without the control plane before running jobs stop (outputs kept); unset, as long as the control plane\'s `welcome` allows (its requeue time less the stop and a margin), which a set value can only shorten' },
  minFreeDiskBytes: { description: 'free bytes in `work_dir` below which doctor warns and the agent takes no new assignment' },
  metricsListen: { description: 'Prometheus `/metrics` of the agent (per-GPU gauges, containers, uploads), `host:port` or `off`; loopback by default: a node exporter\'s host scrapes it, nothing off the machine reaches it' },
  imageCacheBytes: {
    default: 'half the size of the file system holding Docker\'s data root (`docker info`\'s `DockerRootDir`; the work dir\'s when that cannot be read)',
    description: 'the disk budget of the images the agent pulls for jobs and from `prepull_images` (only those: the operator\'s own images are never counted or removed). Before a pull the agent reads the image\'s size from its registry; an image that does not fit beside the images of running and assigned jobs is refused (`image_cache_full`), otherwise the least recently used images no job needs are removed first',
  },
  prepullImages: {
    default: 'empty',
    description: 'images pulled at start and whenever the machine is idle, into the room the budget has free (they never evict; jobs may evict them), so jobs that use them start warm: an array in the file, comma-separated in the variable',
  },
  egressProxyImage: { description: 'the egress proxy image, pinned (`…/gpufarm/egress-proxy@sha256:<64 hex>`, from `scripts/build-images.sh`); unset, jobs with an egress allowlist are refused' },
};

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
      throw new ConfigError(`config file ${path}: cannot be read (${(err as NodeJS.ErrnoException).code ?? errorText(err)})`);
    }
    let parsed: Record<string, unknown>;
    try {
      parsed = path.endsWith('.json') ? (JSON.parse(text) as Record<string, unknown>) : (parseToml(text) as Record<string, unknown>);
    } catch (err) {
      throw new ConfigError(`config file ${path}: not valid ${path.endsWith('.json') ? 'JSON' : 'TOML'}: ${errorText(err).split('\n')[0]}`);
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
