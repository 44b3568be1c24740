import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';

/**
 * Runs `sh -c script` inside a running container and resolves with its stdout and stderr
 * together. The runtime never does this to a job; the egress tests and bench do, to act from
 * inside a job's network.
 */
export async function execInContainer(docker: Docker, containerId: string, script: string): Promise<string> {
  const exec = await docker.getContainer(containerId).exec({ Cmd: ['sh', '-c', script], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  const sink = new PassThrough();
  sink.on('data', (c: Buffer) => chunks.push(c));
  docker.modem.demuxStream(stream, sink, sink);
  await once(stream, 'end');
  return Buffer.concat(chunks).toString();
}
