import { execFile } from 'node:child_process';
import { NvidiaSmiParseError, normalizePciBusId, parseNvidiaSmiXml, type NvidiaSmiReport } from './nvidia-smi-xml.js';

/** What reading the GPUs gave: a report, or why there is none (no driver, no tool, a hang). */
export type GpuReading =
  | { ok: true; report: NvidiaSmiReport }
  | {
      ok: false;
      missing: boolean;
      reason: string;
      /**
       * Set when nvidia-smi failed because the loaded kernel module and the user-space libraries
       * are of different driver versions; `nvmlLibraryVersion` is what it said of the library
       * (`570.124`), null when it said nothing (older drivers).
       */
      driverMismatch?: { nvmlLibraryVersion: string | null };
    };

/**
 * nvidia-smi's exit status when NVML refuses to start because the kernel module and the library
 * differ (`NVML_ERROR_LIB_RM_VERSION_MISMATCH`): after a driver upgrade without a reboot.
 */
export const NVML_LIB_RM_VERSION_MISMATCH = 18;

/**
 * Whether nvidia-smi's failure is the driver/library mismatch, and the library version it
 * named: `Failed to initialize NVML: Driver/library version mismatch`, exit status 18, and on
 * newer drivers (seen with 550 and 570) a second line `NVML library version: 570.124`.
 */
export function parseDriverMismatch(exitCode: unknown, output: string): { nvmlLibraryVersion: string | null } | null {
  if (exitCode !== NVML_LIB_RM_VERSION_MISMATCH && !/Driver\/library version mismatch/i.test(output)) return null;
  return { nvmlLibraryVersion: /NVML library version:\s*(\d+(?:\.\d+){1,2})/i.exec(output)?.[1] ?? null };
}

/** The GPU port: the only thing the agent fakes in tests (a fake `nvidia-smi` on PATH). */
export interface GpuReader {
  read(): Promise<GpuReading>;
}

export interface NvidiaSmiReaderOptions {
  /** The executable; looked up on PATH. */
  command?: string;
  /** A wedged driver can hang nvidia-smi; the read gives up after this long. */
  timeoutMs?: number;
}

/** The arguments of the compute-capability query (`compute_cap` exists from driver 510 on). */
export const COMPUTE_CAP_QUERY = ['--query-gpu=pci.bus_id,compute_cap', '--format=csv,noheader'] as const;

/**
 * The compute capability of each GPU from `nvidia-smi --query-gpu=pci.bus_id,compute_cap
 * --format=csv,noheader` (`00000000:18:00.0, 9.0` per line), by normalized PCI bus id. Lines
 * that are no such pair (`[N/A]`, an error) are skipped: an older driver answers
 * `Field "compute_cap" is not a valid field to query.` and gives none.
 */
export function parseComputeCapabilities(csv: string): Map<string, string> {
  const caps = new Map<string, string>();
  for (const line of csv.split('\n')) {
    const m = /^\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*,\s*(\d{1,2}\.\d{1,2})\s*$/.exec(line);
    const bus = m ? normalizePciBusId(m[1]!) : null;
    if (m && bus) caps.set(bus, m[2]!);
  }
  return caps;
}

interface Run {
  error: (Error & { code?: unknown; killed?: boolean }) | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: readonly string[], timeout: number): Promise<Run> {
  return new Promise((resolve) => {
    execFile(command, args, { timeout, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' }, (error, stdout, stderr) => resolve({ error, stdout, stderr }));
  });
}

/**
 * Runs `nvidia-smi -q -x` (no shell, a timeout, 16 MiB of output at most) and parses it.
 * Warnings on stderr do not fail the read; a non-zero exit does, with nvidia-smi's own message,
 * unless it still printed a report: it exits non-zero when one GPU of several is lost, and the
 * others are listed (the lost one in `report.lost`). Each GPU's compute capability comes from a
 * second query, asked once per driver and set of GPUs (it cannot change without either); a
 * driver without that field leaves it null.
 */
export function nvidiaSmiReader(options: NvidiaSmiReaderOptions = {}): GpuReader {
  const command = options.command ?? 'nvidia-smi';
  const timeout = options.timeoutMs ?? 15_000;
  let caps: { key: string; byBus: Map<string, string> } | null = null;

  const withComputeCapabilities = async (report: NvidiaSmiReport): Promise<NvidiaSmiReport> => {
    const key = `${report.driverVersion}|${report.gpus.map((g) => g.pciBusId).join(',')}`;
    if (caps?.key !== key) {
      const answer = report.gpus.length === 0 ? null : await run(command, COMPUTE_CAP_QUERY, timeout);
      caps = { key, byBus: answer && !answer.error ? parseComputeCapabilities(answer.stdout) : new Map() };
    }
    const byBus = caps.byBus;
    return { ...report, gpus: report.gpus.map((g) => ({ ...g, computeCapability: (g.pciBusId === null ? undefined : byBus.get(normalizePciBusId(g.pciBusId) ?? '')) ?? null })) };
  };

  const parse = async (stdout: string): Promise<GpuReading> => {
    try {
      return { ok: true, report: await withComputeCapabilities(parseNvidiaSmiXml(stdout)) };
    } catch (parseErr) {
      if (!(parseErr instanceof NvidiaSmiParseError)) throw parseErr;
      return { ok: false, missing: false, reason: parseErr.message };
    }
  };

  return {
    async read() {
      const { error, stdout, stderr } = await run(command, ['-q', '-x'], timeout);
      if (!error) return parse(stdout);
      if (error.code === 'ENOENT') return { ok: false, missing: true, reason: `${command} was not found on PATH: the NVIDIA driver is not installed` };
      const killed = error.killed === true;
      if (!killed && stdout.includes('<nvidia_smi_log')) {
        const reading = await parse(stdout);
        if (reading.ok) return reading;
      }
      const said = `${stdout}\n${stderr}`.trim().split('\n').filter(Boolean).slice(0, 3).join(' ');
      const mismatch = killed ? null : parseDriverMismatch(error.code, `${stdout}\n${stderr}`);
      return {
        ok: false,
        missing: false,
        reason: killed ? `${command} did not answer within ${timeout} ms (a hung driver?)` : `${command} failed: ${said || error.message}`,
        ...(mismatch ? { driverMismatch: mismatch } : {}),
      };
    },
  };
}
