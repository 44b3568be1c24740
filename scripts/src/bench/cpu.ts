import { readdirSync, readFileSync } from 'node:fs';

/** Linux reports process times in clock ticks; USER_HZ is 100 on every mainstream kernel. */
const TICKS_PER_SECOND = 100;

/** User plus system CPU seconds of one process so far, or 0 when it is gone or /proc is absent. */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * CPU seconds used so far by the PostgreSQL processes that serve `database`: its backends (and
 * autovacuum workers), whose command line names it, plus the server's own writers and
 * checkpointer. Backends of other databases (other work on the machine) are left out.
 */
function postgresCpuSeconds(database: string): number {
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
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
      const title = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (title.includes(` ${database} `) || SHARED_PROCESS.test(title)) total += processCpuSeconds(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return total;
}

/** PostgreSQL's own processes that work for every database (their process titles). */
const SHARED_PROCESS = /: (?:checkpointer|background writer|walwriter|logger)\b/;

export interface CpuUse {
  /** CPU seconds of the control-plane process (or the replicas together). */
  server: number;
  /** CPU seconds of PostgreSQL for the bench database (backends that ended during the window are missed). */
  postgres: number;
}

/**
 * Starts counting CPU time of the server process and of PostgreSQL; the returned function gives
 * the use since. CPU per request is steadier than requests per second on a shared 2-core
 * machine, so the table shows it beside the rates.
 */
/** What a measurement counts: the control-plane process (or several replicas, summed) and the database it serves from. */
export interface CpuSubjects {
  serverPid: number | readonly number[];
  database: string;
}

export function startCpuMeter({ serverPid, database }: CpuSubjects): () => CpuUse {
  const pids = typeof serverPid === 'number' ? [serverPid] : serverPid;
  const serverSeconds = () => pids.reduce((sum, pid) => sum + processCpuSeconds(pid), 0);
  const server = serverSeconds();
  const postgres = postgresCpuSeconds(database);
  return () => ({ server: serverSeconds() - server, postgres: Math.max(0, postgresCpuSeconds(database) - postgres) });
}
