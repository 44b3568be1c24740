import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { challengeCommitMessageSchema, challengeOpeningsMessageSchema, GpufarmError } from '@gpufarm/shared';
import { z } from 'zod';
import type { ChallengeCommitment, ChallengeOpening, ChallengeRow, ChallengeSpec } from './challenge.js';

/**
 * The one driver of `gpu-bench --challenge`'s stdin/stdout protocol (agent/gpu-bench,
 * docs/decisions.md "GPU proof"), wherever the program runs: a container on a farm machine
 * (`container-challenge.ts`), a local process in the tests and scripts/src/gpu-challenge-check.ts.
 *
 *   gpu-bench                                      driver
 *   {"ready":true,"program":…,"gpus":[…]}     ->
 *                                             <-   go HEX
 *   {"commit":[{uuid,roots,gpuSeconds}…]}     ->
 *                                             <-   open UUID:ROUND:ROW …
 *   {"openings":[{uuid,round,row,path}…]}     ->   (then it exits 0)
 *
 * Every line is parsed with its schema; a program that exits, or prints anything else, ends the
 * session with a `GpuBenchError` of one line naming what happened and the program's own reason.
 */

/** A started gpu-bench: its pipes, its end, and how to stop it. */
export interface GpuBenchProcess {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** Settles once it ended: its exit code, or null with `error` when it could not start or was killed. */
  exited: Promise<{ code: number | null; error: string | null }>;
  /** Stops it now and frees what it holds (the process, its container); resolves once done. */
  stop(): Promise<void>;
}

const uuidSchema = z.string().min(1).max(128);

/** `{"ready":true,…}`: set up on these GPUs (UUIDs as the driver reports them), waiting for `go`. */
export const gpuBenchReadyLineSchema = z.strictObject({
  ready: z.literal(true),
  program: z.string().regex(/^gpu-bench \d+\.\d+\.\d+$/),
  gpus: z.array(z.strictObject({ uuid: uuidSchema, index: z.int().min(0) })).min(1),
});
/** `{"commit":[…]}`: each GPU's roots and GPU time, within the limits of `challenge.commit`. */
export const gpuBenchCommitLineSchema = z.strictObject({ commit: challengeCommitMessageSchema.shape.gpus });
/** `{"openings":[…]}`: each opened row's path, within the limits of `challenge.openings`. */
export const gpuBenchOpeningsLineSchema = z.strictObject({ openings: challengeOpeningsMessageSchema.shape.openings });
export type GpuBenchReadyLine = z.infer<typeof gpuBenchReadyLineSchema>;

/** Most of the program's stderr kept for errors (its end). */
const STDERR_KEEP_CHARS = 64 * 1024;

/** The session failed: `exitCode` is the program's when it exited (null otherwise), `stderr` the end of what it said. */
export class GpuBenchError extends GpufarmError<'gpu_bench_failed'> {
  constructor(message: string, readonly exitCode: number | null, readonly stderr: string) {
    super('gpu_bench_failed', message);
  }
}

/**
 * gpu-bench's own account of a failure: its last `gpu-bench: …` line on stderr, else the last
 * line it printed there; null when it printed nothing.
 */
export function gpuBenchReason(stderr: string): string | null {
  const lines = stderr.split('\n').map((l) => l.trim()).filter(Boolean);
  const own = lines.filter((l) => l.startsWith('gpu-bench: '));
  const said = own.length > 0 ? own[own.length - 1]!.slice('gpu-bench: '.length) : lines[lines.length - 1];
  return said === undefined ? null : said.slice(0, 500);
}

/** The arguments of a challenge as the agent runs it: its shapes, pre-seed and GPUs by UUID, no progress lines. */
export function gpuBenchChallengeArgs(spec: Pick<ChallengeSpec, 'gpus' | 'm' | 'n' | 'k' | 'rounds' | 'preSeed'>): string[] {
  return [
    '--challenge', '--json-only',
    '--gpus', spec.gpus.map((g) => g.uuid).join(','),
    '--m', String(spec.m), '--n', String(spec.n), '--k', String(spec.k), '--rounds', String(spec.rounds),
    '--pre-seed', spec.preSeed,
  ];
}

/**
 * gpu-bench as a local process (`command`: the binary, or a loader and the binary), with its
 * stdin, stdout and stderr piped; `stop()` kills it.
 */
export function spawnGpuBench(command: readonly string[], args: readonly string[], options: { env?: NodeJS.ProcessEnv } = {}): GpuBenchProcess {
  const child = spawn(command[0]!, [...command.slice(1), ...args], { env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<{ code: number | null; error: string | null }>((resolve) => {
    child.once('error', (err) => resolve({ code: null, error: `${command.join(' ')} could not be started: ${err.message}` }));
    child.once('close', (code, signal) => resolve({ code, error: signal ? `killed by ${signal}` : null }));
  });
  return {
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) child.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * One run of gpu-bench's challenge protocol over a started process: `ready()`, `go(seed)`,
 * `open(rows)`, each resolving with the program's parsed line. Each checks that the line answers
 * what was asked (the commitment covers the ready GPUs, the openings are the rows asked, in
 * order). On a failure the process is stopped and the step rejects with a `GpuBenchError`.
 */
export class GpuBenchSession {
  private readonly lines: string[] = [];
  private stdoutEnded = false;
  private wake: (() => void) | null = null;
  private stderrText = '';
  private readyLine: GpuBenchReadyLine | null = null;
  private readonly ended: Promise<{ code: number | null; error: string | null }>;

  /** `name` says what runs in errors (`gpu-bench`, `the challenge container`). */
  constructor(private readonly program: GpuBenchProcess, private readonly name = 'gpu-bench') {
    // Writes after the program exited fail with EPIPE; its exit says what happened.
    program.stdin.on('error', () => undefined);
    program.stderr.on('data', (d: Buffer) => {
      this.stderrText = (this.stderrText + d.toString()).slice(-STDERR_KEEP_CHARS);
    });
    const reader = createInterface({ input: program.stdout, crlfDelay: Infinity });
    reader.on('line', (line) => {
      if (line.trim() === '') return;
      this.lines.push(line);
      this.wake?.();
    });
    reader.on('close', () => {
      this.stdoutEnded = true;
      this.wake?.();
    });
    this.ended = program.exited;
  }

  /** What the program printed on stderr so far (its last 64 KiB). */
  get stderr(): string {
    return this.stderrText;
  }

  /** Settles once the program ended: its exit code (null when it could not start or was killed). */
  get exited(): Promise<{ code: number | null; error: string | null }> {
    return this.ended;
  }

  /** Waits until the program is set up: its ready line (the GPUs it runs on). */
  async ready(): Promise<GpuBenchReadyLine> {
    this.readyLine = await this.read('ready', gpuBenchReadyLineSchema);
    return this.readyLine;
  }

  /**
   * Starts the timed part: writes `go SEED` and waits for the commitment. `seed` goes as it is
   * (gpu-bench refuses anything but 64 hex digits, and exits 2).
   */
  async go(seed: string): Promise<ChallengeCommitment[]> {
    this.program.stdin.write(`go ${seed}\n`);
    const { commit } = await this.read('commit', gpuBenchCommitLineSchema);
    const ready = (this.readyLine?.gpus ?? []).map((g) => g.uuid).sort();
    const committed = commit.map((c) => c.uuid).sort();
    if (this.readyLine && ready.join() !== committed.join()) {
      return this.fail(`${this.name} committed for ${committed.join(', ')}, not for the GPUs it was ready on (${ready.join(', ')})`);
    }
    return commit;
  }

  /** Asks for the rows' Merkle paths: resolves with them, in the order asked. */
  async open(rows: readonly ChallengeRow[]): Promise<ChallengeOpening[]> {
    this.program.stdin.write(`open ${rows.map((r) => `${r.uuid}:${r.round}:${r.row}`).join(' ')}\n`);
    const { openings } = await this.read('openings', gpuBenchOpeningsLineSchema);
    const asked = rows.map((r) => `${r.uuid}:${r.round}:${r.row}`).join(' ');
    const answered = openings.map((o) => `${o.uuid}:${o.round}:${o.row}`).join(' ');
    if (asked.toLowerCase() !== answered.toLowerCase()) return this.fail(`${this.name} opened other rows than asked (${answered.slice(0, 200)})`);
    return openings;
  }

  /** Stops the program (idempotent). */
  stop(): Promise<void> {
    return this.program.stop();
  }

  /** The next line, parsed as the `what` line; on anything else the program is stopped and the step fails. */
  private async read<T>(what: string, schema: z.ZodType<T>): Promise<T> {
    const line = await this.nextLine(what);
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch {
      return this.fail(`${this.name} printed ${JSON.stringify(line.slice(0, 200))} where its ${what} line was due`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return this.fail(`${this.name}'s ${what} line does not read as one (${issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'invalid'}): ${line.slice(0, 200)}`);
    }
    return parsed.data;
  }

  private async nextLine(what: string): Promise<string> {
    for (;;) {
      const line = this.lines.shift();
      if (line !== undefined) return line;
      if (this.stdoutEnded) {
        const { code, error } = await this.ended;
        // The stderr pipe may still hold the program's last words when stdout closes.
        await new Promise((resolve) => setImmediate(resolve));
        const reason = gpuBenchReason(this.stderrText);
        const how = error ?? (code === null ? 'stopped' : `exited with ${code}`);
        throw new GpuBenchError(`${this.name} ${how} before its ${what} line${reason ? `: ${reason}` : ''}`, code, this.stderrText);
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = null;
    }
  }

  private async fail(message: string): Promise<never> {
    await this.program.stop().catch(() => undefined);
    const { code } = await this.ended;
    throw new GpuBenchError(message, code, this.stderrText);
  }
}
