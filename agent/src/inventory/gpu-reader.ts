import { execFile } from 'node:child_process';
import { NvidiaSmiParseError, parseNvidiaSmiXml, type NvidiaSmiReport } from './nvidia-smi-xml.js';

/** What reading the GPUs gave: a report, or why there is none (no driver, no tool, a hang). */
export type GpuReading =
  | { ok: true; report: NvidiaSmiReport }
  | { ok: false; missing: boolean; reason: string };

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

/**
 * Runs `nvidia-smi -q -x` (no shell, a timeout, 16 MiB of output at most) and parses it.
 * Warnings on stderr do not fail the read; a non-zero exit does, with nvidia-smi's own message,
 * unless it still printed a report: it exits non-zero when one GPU of several is lost, and the
 * others are listed (the lost one in `report.lost`).
 */
export function nvidiaSmiReader(options: NvidiaSmiReaderOptions = {}): GpuReader {
  const command = options.command ?? 'nvidia-smi';
  const timeout = options.timeoutMs ?? 15_000;
  return {
    read: () =>
      new Promise((resolve) => {
        execFile(command, ['-q', '-x'], { timeout, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' }, (err, stdout, stderr) => {
          if (err) {
            const code = (err as NodeJS.ErrnoException).code;
            if (code === 'ENOENT') {
              resolve({ ok: false, missing: true, reason: `${command} was not found on PATH: the NVIDIA driver is not installed` });
              return;
            }
            const killed = (err as { killed?: boolean }).killed === true;
            if (!killed && stdout.includes('<nvidia_smi_log')) {
              try {
                resolve({ ok: true, report: parseNvidiaSmiXml(stdout) });
                return;
              } catch (parseErr) {
                if (!(parseErr instanceof NvidiaSmiParseError)) throw parseErr;
              }
            }
            const said = `${stdout}\n${stderr}`.trim().split('\n').filter(Boolean).slice(0, 3).join(' ');
            resolve({ ok: false, missing: false, reason: killed ? `${command} did not answer within ${timeout} ms (a hung driver?)` : `${command} failed: ${said || err.message}` });
            return;
          }
          try {
            resolve({ ok: true, report: parseNvidiaSmiXml(stdout) });
          } catch (parseErr) {
            if (!(parseErr instanceof NvidiaSmiParseError)) throw parseErr;
            resolve({ ok: false, missing: false, reason: parseErr.message });
          }
        });
      }),
  };
}
