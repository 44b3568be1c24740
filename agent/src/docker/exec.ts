import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';

/** What a command run in a container printed (stdout and stderr together) and its exit code (null when unknown). */
export interface ExecResult {
  output: string;
  exitCode: number | null;
  /** It did not end within the time given: `output` is what it printed until then. */
  timedOut: boolean;
}

/**
 * Runs `argv` (no shell) inside a running container as the container's user, and resolves with
 * its output and exit code once it ends or `timeoutMs` passed. The runtime runs only
 * `nvidia-smi -L` in a job (`gpu-access.ts`); the egress tests and bench run shell scripts.
 * @throws when Docker refuses the exec (no such container, not running)
 */
export async function execCommand(docker: Docker, containerId: string, argv: string[], timeoutMs = 30_000): Promise<ExecResult> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: argv, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  const sink = new PassThrough();
  sink.on('data', (c: Buffer) => chunks.push(c));
  docker.modem.demuxStream(stream, sink, sink);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    once(stream, 'end').then(() => false),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs))),
  ]);
  clearTimeout(timer);
  if (timedOut) (stream as unknown as { destroy: () => void }).destroy();
  const exitCode = timedOut ? null : ((await exec.inspect()) as { ExitCode: number | null }).ExitCode;
  return { output: Buffer.concat(chunks).toString(), exitCode, timedOut };
}

/** Runs `sh -c script` inside a running container and resolves with its stdout and stderr together (the egress tests and bench act from inside a job's network). */
export async function execInContainer(docker: Docker, containerId: string, script: string): Promise<string> {
  return (await execCommand(docker, containerId, ['sh', '-c', script], 10 * 60_000)).output;
}
