import { readdirSync, readFileSync } from 'node:fs';

/** Linux reports process times in clock ticks; USER_HZ is 100 on every mainstream kernel. */
const TICKS_PER_SECOND = 100;

/** User plus system CPU seconds of one process so far, or 0 when it is gone or /proc is absent. */
function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/** CPU seconds used so far by every PostgreSQL server process on this machine (0 without /proc). */
function postgresCpuSeconds(): number {
  let total = 0;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') total += processCpuSeconds(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return total;
}

export interface CpuUse {
  /** CPU seconds of the control-plane process. */
  server: number;
  /** CPU seconds of all PostgreSQL processes (backends that ended during the window are missed). */
  postgres: number;
}

/**
 * Starts counting CPU time of the server process and of PostgreSQL; the returned function gives
 * the use since. CPU per request is steadier than requests per second on a shared 2-core
 * machine, so the table shows it beside the rates.
 */
export function startCpuMeter(serverPid: number): () => CpuUse {
  const server = processCpuSeconds(serverPid);
  const postgres = postgresCpuSeconds();
  return () => ({ server: processCpuSeconds(serverPid) - server, postgres: postgresCpuSeconds() - postgres });
}
