import { resolve } from 'node:path';
import si from 'systeminformation';
import type { HostInventory } from '@gpufarm/shared';

/** The host-facts port: CPU, memory, disk, OS. */
export interface HostReader {
  read(): Promise<HostInventory>;
}

/**
 * Host facts through `systeminformation`. Only the fields below leave the machine:
 * `osInfo()` also returns the hostname, FQDN and serial, which are dropped here on purpose.
 * Disk figures are those of the file system holding `workDir` (the longest mount prefix).
 */
export function systemHostReader(workDir: string): HostReader {
  const dir = resolve(workDir);
  return {
    async read() {
      const [cpu, mem, os, disks] = await Promise.all([si.cpu(), si.mem(), si.osInfo(), si.fsSize()]);
      let disk: { size: number; available: number } | undefined;
      let best = -1;
      for (const d of disks) {
        const mount = d.mount.endsWith('/') ? d.mount : `${d.mount}/`;
        if ((dir === d.mount || `${dir}/`.startsWith(mount)) && mount.length > best) {
          best = mount.length;
          disk = { size: d.size, available: d.available };
        }
      }
      const cpuModel = [cpu.manufacturer, cpu.brand].filter((s) => s && s.trim()).join(' ').trim() || 'unknown';
      return {
        cpuModel,
        cpuCores: Math.max(1, cpu.physicalCores || cpu.cores || 1),
        cpuThreads: Math.max(1, cpu.cores || 1),
        ramBytes: mem.total,
        diskFreeBytes: Math.max(0, Math.round(disk?.available ?? 0)),
        diskTotalBytes: Math.max(0, Math.round(disk?.size ?? 0)),
        os: [os.distro, os.release].filter(Boolean).join(' ') || os.platform,
        kernel: os.kernel,
        arch: os.arch,
      };
    },
  };
}
