import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * `<dataDir>/control-plane.json` (mode 0600): written by a control plane running on the
 * embedded database, so other local commands (`npm run admin`, `npm run seed`) know it is
 * there, reach it over HTTP, and never open the same PGlite files from a second process.
 */
const stateSchema = z.object({
  pid: z.number().int().positive(),
  url: z.url(),
  adminToken: z.string().nullable(),
});
export type LocalState = z.infer<typeof stateSchema>;

const stateFile = (dataDir: string) => join(dataDir, 'control-plane.json');

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function writeLocalState(dataDir: string, state: LocalState): void {
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(stateFile(dataDir), `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
}

/** The state file's content; null when it is missing, truncated or not ours. */
function readState(file: string): LocalState | null {
  if (!existsSync(file)) return null;
  try {
    const parsed = stateSchema.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** The running local control plane's state, or null when none runs (a stale file is ignored). */
export function readLiveLocalState(dataDir: string): LocalState | null {
  const state = readState(stateFile(dataDir));
  return state && isAlive(state.pid) ? state : null;
}

export function removeLocalState(dataDir: string, pid = process.pid): void {
  const file = stateFile(dataDir);
  if (!existsSync(file)) return;
  const state = readState(file);
  if (!state || state.pid === pid) rmSync(file, { force: true });
}
