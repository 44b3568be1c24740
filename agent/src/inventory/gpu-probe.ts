import type Docker from 'dockerode';
import { demuxDockerOutput } from './docker-output.js';
import { errorText } from '@gpufarm/shared';

/** One GPU as `nvidia-smi -L` lists it. */
export interface ProbeListedGpu {
  name: string;
  uuid: string;
}

/** Whether a container can see the machine's GPUs; `listed` is what its `nvidia-smi -L` printed. */
export type GpuProbeResult = { ok: true; listed: ProbeListedGpu[] } | { ok: false; reason: string };

/**
 * The GPUs of `nvidia-smi -L` output (`GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)`); MIG
 * device lines and anything else are skipped.
 */
export function parseNvidiaSmiList(text: string): ProbeListedGpu[] {
  const listed: ProbeListedGpu[] = [];
  for (const line of text.split('\n')) {
    const m = /^GPU \d+: (.+) \(UUID: ([^)\s]+)\)\s*$/.exec(line.trim());
    if (m) listed.push({ name: m[1]!.trim(), uuid: m[2]! });
  }
  return listed;
}

/**
 * The GPU-probe port: proves that a container started the way jobs are started (NVIDIA
 * runtime, GPUs by UUID through `DeviceRequests`) sees every GPU the host lists.
 */
export interface GpuProbe {
  probe(uuids: string[]): Promise<GpuProbeResult>;
}

export interface DockerGpuProbeOptions {
  /** An image with `nvidia-smi` reachable through the NVIDIA runtime (any CUDA base image). */
  image: string;
  timeoutMs?: number;
}

/**
 * The probe through dockerode: `nvidia-smi -L` in a throwaway container with the GPUs
 * requested by UUID, network none, all capabilities dropped; every UUID must appear in its
 * output. The image must already be on the machine: the probe never pulls.
 */
export function dockerGpuProbe(docker: Docker, options: DockerGpuProbeOptions): GpuProbe {
  const timeoutMs = options.timeoutMs ?? 60_000;
  return {
    async probe(uuids) {
      try {
        await docker.getImage(options.image).inspect();
      } catch {
        return { ok: false, reason: `the GPU probe image ${options.image} is not on this machine: run "docker pull ${options.image}" (or set gpuProbeImage)` };
      }
      let container: Docker.Container | undefined;
      try {
        container = await docker.createContainer({
          Image: options.image,
          Cmd: ['nvidia-smi', '-L'],
          Labels: { 'gpufarm.probe': 'gpu' },
          HostConfig: {
            NetworkMode: 'none',
            CapDrop: ['ALL'],
            SecurityOpt: ['no-new-privileges'],
            DeviceRequests: [{ Driver: 'nvidia', DeviceIDs: uuids, Capabilities: [['gpu', 'utility']] }],
          },
        });
        await container.start();
        // Asked after the start: 'not-running' answers at once, with the exit code, for a container that
        // already exited. A 'next-exit' wait sent beside the start could reach dockerd after a fast exit
        // (no driver: exit 3 at once) and wait for a next exit that never comes.
        const waited = container.wait({ condition: 'not-running' }) as Promise<{ StatusCode: number }>;
        let timer: NodeJS.Timeout | undefined;
        const timedOut = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), timeoutMs); });
        const outcome = await Promise.race([waited, timedOut]);
        clearTimeout(timer);
        if (outcome === 'timeout') return { ok: false, reason: `the GPU probe container did not finish within ${timeoutMs} ms` };
        const output = demuxDockerOutput(await container.logs({ stdout: true, stderr: true }));
        const logs = `${output.stdout}\n${output.stderr}`;
        if (outcome.StatusCode !== 0) return { ok: false, reason: `nvidia-smi -L in a container exited with ${outcome.StatusCode}: ${logs.replace(/[^\x20-\x7e\n]/g, '').trim().slice(0, 300)}` };
        const missing = uuids.filter((u) => !logs.includes(u));
        if (missing.length > 0) return { ok: false, reason: `a container sees ${uuids.length - missing.length} of ${uuids.length} GPUs; missing ${missing.join(', ')}` };
        return { ok: true, listed: parseNvidiaSmiList(output.stdout) };
      } catch (err) {
        const message = errorText(err);
        const hint = /could not select device driver|unknown or invalid runtime|nvidia/i.test(message)
          ? ' (install the NVIDIA Container Toolkit and run "nvidia-ctk runtime configure --runtime=docker", then restart Docker)'
          : '';
        return { ok: false, reason: `a container could not be started with the GPUs: ${message.trim().slice(0, 300)}${hint}` };
      } finally {
        await container?.remove({ force: true }).catch(() => undefined);
      }
    },
  };
}
