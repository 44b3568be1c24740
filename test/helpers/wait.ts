import { errorText } from '@gpufarm/shared';

/**
 * Polls `check` until it returns a value other than undefined/false, every `intervalMs`; fails
 * after `timeoutMs` with `what` and the last value `describe` gives, so a stuck test says where.
 */
export async function until<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  what: string,
  options: { timeoutMs?: number; intervalMs?: number; describe?: () => Promise<string> | string } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const end = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      lastError = null;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > end) {
      const last = options.describe ? await Promise.resolve(options.describe()).catch((e: unknown) => `(describe failed: ${String(e)})`) : '';
      const because = lastError ? ` (last error: ${errorText(lastError)})` : '';
      throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}${because}${last ? `; last seen: ${last}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 200));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
