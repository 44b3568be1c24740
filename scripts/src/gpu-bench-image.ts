/**
 * `tsx scripts/src/gpu-bench-image.ts ROOTFS REPOSITORY`: makes the gpu-bench image for
 * scripts/build-images.sh with the agent's own code (the image a farm's agent makes is this
 * one), from the root laid out by scripts/build-gpu-bench.sh. Prints the image's name.
 */
import Docker from 'dockerode';
import { ensureGpuBenchImage, readGpuBenchProgram } from '@gpufarm/agent';

const [rootfs, repository] = process.argv.slice(2);
if (rootfs === undefined || repository === undefined) {
  process.stderr.write('usage: tsx scripts/src/gpu-bench-image.ts ROOTFS REPOSITORY\n');
  process.exit(2);
}
const { image } = await ensureGpuBenchImage(new Docker(), { repository, program: readGpuBenchProgram(rootfs) });
process.stdout.write(`${image}\n`);
