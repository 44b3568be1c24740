import { isTerminalStatus, type Job } from '@gpufarm/shared';
import { GfError } from './errors.js';
import { sleep } from './transport.js';

export interface WaitOptions {
  /** Stops waiting (the job keeps running) with the signal's reason. */
  signal?: AbortSignal;
  /** Gives up with `timeout` after this long (the job keeps running); 24 h by default. */
  timeoutMs?: number;
  /** The first pause between polls; 2 s by default. */
  initialIntervalMs?: number;
  /** The longest pause between polls; 15 s by default. */
  maxIntervalMs?: number;
  /** Called with each polled job, for progress output. */
  onPoll?: (job: Job) => void;
}

/** The spec's polling: pauses from 2 s growing to 15 s, giving up waiting after 24 h. */
export const WAIT_DEFAULTS = { timeoutMs: 24 * 3_600_000, initialIntervalMs: 2_000, maxIntervalMs: 15_000 } as const;

const INTERVAL_GROWTH = 1.5;

/** The pauses between polls: `initialIntervalMs`, then half as long again each time, at most `maxIntervalMs`. */
export function* pollPauses(options: Pick<WaitOptions, 'initialIntervalMs' | 'maxIntervalMs'> = {}): Generator<number, never> {
  const max = options.maxIntervalMs ?? WAIT_DEFAULTS.maxIntervalMs;
  let pause = Math.min(options.initialIntervalMs ?? WAIT_DEFAULTS.initialIntervalMs, max);
  for (;;) {
    yield pause;
    pause = Math.min(max, Math.round(pause * INTERVAL_GROWTH));
  }
}

/**
 * Polls `getJob` until the job's status is final and answers that job; a retryable failure
 * (network, 429, 5xx) is polled through, any other one ends the wait. The pause starts at
 * `initialIntervalMs` and grows by half each poll up to `maxIntervalMs`; the last pause is cut
 * so the wait ends at the deadline with `timeout`.
 */
export async function waitForJob(getJob: (signal: AbortSignal) => Promise<Job>, jobId: string, options: WaitOptions = {}): Promise<Job> {
  const timeoutMs = options.timeoutMs ?? WAIT_DEFAULTS.timeoutMs;
  const pauses = pollPauses(options);
  const deadline = Date.now() + timeoutMs;
  const deadlineSignal = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([options.signal, deadlineSignal]) : deadlineSignal;
  const timedOut = (cause?: unknown) =>
    new GfError('timeout', `Job ${jobId} did not finish within ${timeoutMs} ms of waiting; it keeps running. Wait again or check it with GET /v1/jobs/${jobId}.`, { retryable: true, cause });
  for (;;) {
    let job: Job | null = null;
    try {
      job = await getJob(signal);
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason;
      if (deadlineSignal.aborted) throw timedOut(err);
      // A passing outage (the request's own retries spent) does not end a wait of hours.
      if (!(err instanceof GfError && err.retryable)) throw err;
    }
    if (job) {
      options.onPoll?.(job);
      if (isTerminalStatus(job.status)) return job;
    }
    const left = deadline - Date.now();
    if (left <= 0) throw timedOut();
    await sleep(Math.min(pauses.next().value, left), options.signal);
    if (Date.now() >= deadline) throw timedOut();
  }
}
