/**
 * Reconnect delay with exponential backoff and full jitter: a random delay between 0 and
 * `min(maxMs, initialMs * 2^attempt)`, so a fleet that lost its control plane does not come
 * back in lockstep. `attempt` counts failures since the last successful `welcome`. Pure.
 */
export function backoffDelay(attempt: number, options: { initialMs: number; maxMs: number }, random: () => number = Math.random): number {
  const ceiling = Math.min(options.maxMs, options.initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(Math.max(options.initialMs / 2, random() * ceiling));
}
