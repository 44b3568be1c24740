import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/**
 * gpu-bench from this checkout's sources, laid out as its image root in `dir`
 * (scripts/build-gpu-bench.sh: nvcc, cached by the sources, so only a changed program compiles).
 * Returns the root; the binary is `<root>/gpu-bench`.
 */
export async function buildGpuBenchRootfs(dir: string): Promise<string> {
  await run('bash', [join(REPO_ROOT, 'scripts/build-gpu-bench.sh'), '--rootfs', dir], { maxBuffer: 4 * 1024 * 1024 });
  return dir;
}

/**
 * The tests' fake NVIDIA driver (agent/test/fixtures/fake-libcuda.c) built into `dir` as
 * libcuda.so.1: put `dir` on LD_LIBRARY_PATH and gpu-bench's dlopen finds it.
 */
export async function buildFakeLibcuda(dir: string): Promise<string> {
  const source = fileURLToPath(new URL('../fixtures/fake-libcuda.c', import.meta.url));
  await run('gcc', ['-shared', '-fPIC', '-O2', '-Wall', '-Werror', '-I', join(REPO_ROOT, 'agent/gpu-bench/src'), '-o', join(dir, 'libcuda.so.1'), source]);
  return dir;
}

export interface ProgramResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a program with `env` over a copy of this process's environment; never rejects. */
export function runProgram(file: string, args: string[], env: Record<string, string> = {}, timeoutMs = 300_000): Promise<ProgramResult> {
  return new Promise((resolve) => {
    execFile(file, args, { env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** What a fatbin holds: each entry's kind and architecture (`sm_80` SASS, `compute_100` PTX). */
export interface FatbinEntry {
  kind: 'sass' | 'ptx';
  arch: number;
}

/**
 * The fatbins in an ELF binary's `.nv_fatbin` section, as `cuobjdump --list-elf/--list-ptx`
 * lists them (this machine's toolkit has no cuobjdump): the fatbin header (magic 0xBA55ED50,
 * header size at 6, payload size at 8), then entries of kind 1 (PTX) or 2 (ELF) with their
 * header size at 4, payload size at 8 and architecture at 0x1c.
 */
export function fatbinEntries(binaryPath: string): FatbinEntry[] {
  const elf = readFileSync(binaryPath);
  const shoff = Number(elf.readBigUInt64LE(0x28));
  const shentsize = elf.readUInt16LE(0x3a);
  const shnum = elf.readUInt16LE(0x3c);
  const shstrndx = elf.readUInt16LE(0x3e);
  const section = (i: number) => {
    const at = shoff + i * shentsize;
    return { name: elf.readUInt32LE(at), offset: Number(elf.readBigUInt64LE(at + 0x18)), size: Number(elf.readBigUInt64LE(at + 0x20)) };
  };
  const names = section(shstrndx);
  const nameOf = (at: number) => elf.toString('latin1', names.offset + at, elf.indexOf(0, names.offset + at));
  const fatbin = Array.from({ length: shnum }, (_, i) => section(i)).find((s) => nameOf(s.name) === '.nv_fatbin');
  if (!fatbin) throw new Error(`${binaryPath} has no .nv_fatbin section`);
  const entries: FatbinEntry[] = [];
  for (let at = fatbin.offset; at + 16 <= fatbin.offset + fatbin.size; ) {
    if (elf.readUInt32LE(at) !== 0xba55ed50) break;
    const end = at + elf.readUInt16LE(at + 6) + Number(elf.readBigUInt64LE(at + 8));
    for (let e = at + elf.readUInt16LE(at + 6); e < end; e += elf.readUInt32LE(e + 4) + Number(elf.readBigUInt64LE(e + 8))) {
      entries.push({ kind: elf.readUInt16LE(e) === 1 ? 'ptx' : 'sass', arch: elf.readUInt32LE(e + 0x1c) });
    }
    at = end;
  }
  return entries;
}
