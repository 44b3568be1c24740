import { PassThrough, type Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { errorText } from '@gpufarm/shared';
import { gpuBenchDeviceRequests, gpuBenchImage } from '../benchmark/gpu-container.js';
import { challengeLabels, containerName } from '../docker/labels.js';
import type { ChallengeSpec, ChallengeStarter } from './challenge.js';
import { gpuBenchChallenge } from './gpu-bench-challenge.js';
import type { GpuBenchProcess } from './gpu-bench-session.js';

/**
 * The GPU challenge on a farm machine: `gpu-bench --challenge` in the benchmark's image
 * (`benchmark_image`, made from the agent's own program on first use), in a container that holds
 * exactly the challenge's GPUs by UUID, with no network and no capabilities, its stdin attached.
 * The container is labelled as this agent's (a restarted agent removes it: no assignment owns
 * it) and removed when the challenge ends, fails or is cancelled.
 */

/** Where the NVIDIA Container Toolkit's libraries are found in the image (its LD_LIBRARY_PATH). */
const DRIVER_LIBRARY_IN_IMAGE = '/usr/local/nvidia/lib64/libcuda.so.1';

export interface ChallengeContainerParams {
  image: string;
  /** The agent's owner label (the machine id). */
  owner: string;
  spec: ChallengeSpec;
  /** gpu-bench's arguments (`gpuBenchChallengeArgs`). */
  args: string[];
  /**
   * A libcuda.so.1 on this host to mount where the toolkit mounts the driver's, instead of asking
   * the NVIDIA runtime for the GPUs: the tests' fake driver on a machine without GPUs. Null on farms.
   */
  driverLibrary?: string | null;
}

/** The challenge container's settings (pure): GPUs by UUID, stdin open once, no network, no capabilities. */
export function challengeContainerOptions(p: ChallengeContainerParams): Docker.ContainerCreateOptions {
  return {
    name: containerName(p.owner, p.spec.challengeId),
    Image: p.image,
    Cmd: p.args,
    Labels: challengeLabels(p.owner, p.spec.challengeId),
    Tty: false,
    OpenStdin: true,
    // The program's stdin closes when the agent's attachment does.
    StdinOnce: true,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    HostConfig: {
      NetworkMode: 'none',
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      ...(p.driverLibrary ? { Binds: [`${p.driverLibrary}:${DRIVER_LIBRARY_IN_IMAGE}:ro`] } : { DeviceRequests: gpuBenchDeviceRequests(p.spec.gpus.map((g) => g.uuid)) }),
    },
  };
}

export interface DockerChallengeOptions {
  docker: Docker;
  /** The `benchmark_image` setting. */
  image: string;
  /** The agent's owner label (the machine id). */
  owner: string;
  /** Where the agent's gpu-bench program is (default: where the package carries it). */
  programDir?: string;
  /** See `ChallengeContainerParams.driverLibrary`. */
  driverLibrary?: string | null;
}

/** Challenges on real GPUs (`ChallengeStarter`), each in its own container. */
export function dockerChallenges(options: DockerChallengeOptions): ChallengeStarter {
  return (spec) => gpuBenchChallenge(spec, (args) => startChallengeContainer(options, spec, args), 'the challenge container');
}

/**
 * Creates the container, attaches to its stdin, stdout and stderr, and starts it. `stop()` removes
 * it (killing the program if it still runs); a container that could not start is removed before
 * this rejects.
 */
async function startChallengeContainer(options: DockerChallengeOptions, spec: ChallengeSpec, args: string[]): Promise<GpuBenchProcess> {
  const { docker } = options;
  const image = await gpuBenchImage(docker, { image: options.image, ...(options.programDir ? { programDir: options.programDir } : {}) });
  const container = await docker.createContainer(challengeContainerOptions({ image, owner: options.owner, spec, args, driverLibrary: options.driverLibrary ?? null }));
  let removal: Promise<void> | null = null;
  const remove = () => (removal ??= container.remove({ force: true }).then(() => undefined, () => undefined));
  let stream: Duplex | null = null;
  try {
    stream = (await container.attach({ stream: true, hijack: true, stdin: true, stdout: true, stderr: true })) as Duplex;
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    docker.modem.demuxStream(stream, stdout, stderr);
    const ended = () => {
      stdout.end();
      stderr.end();
    };
    stream.once('end', ended);
    stream.once('close', ended);
    stream.on('error', ended);
    // Asked before the start, so an exit right after it is not missed.
    const exited = (container.wait({ condition: 'next-exit' }) as Promise<{ StatusCode: number }>).then(
      (r) => ({ code: r.StatusCode, error: null }),
      (err: unknown) => ({ code: null, error: `Docker lost the container: ${errorText(err)}` }),
    );
    await container.start();
    const attached = stream;
    return {
      stdin: attached,
      stdout,
      stderr,
      exited,
      stop: async () => {
        await remove();
        attached.destroy();
      },
    };
  } catch (err) {
    stream?.destroy();
    await remove();
    throw err;
  }
}
