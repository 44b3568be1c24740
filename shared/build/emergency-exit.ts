/**
 * Last-resort cleanups, run synchronously when this test process exits or tap kills it for its
 * time limit (SIGALRM), so no child outlives the test even when its teardown cannot finish.
 */
const emergency = new Set<() => void>();
let emergencyHooked = false;

/** Registers `fn` (synchronous) to run if the process ends before the returned function is called. */
export function onEmergencyExit(fn: () => void): () => void {
  if (!emergencyHooked) {
    emergencyHooked = true;
    const runAll = () => {
      for (const cleanup of [...emergency].reverse()) {
        try {
          cleanup();
        } catch {
          // best effort: the next one still runs
        }
      }
      emergency.clear();
    };
    process.once('exit', runAll);
    process.once('SIGALRM', runAll);
  }
  emergency.add(fn);
  return () => emergency.delete(fn);
}
