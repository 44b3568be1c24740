import type { LocalImages } from './marketplace.js';

/** Highest price the test jobs accept; the test farms ask less. */
export const MAX_PRICE_USD = '2.00';

/** The service's canary job: `sha256-chain <iterations>` in the canary image, pinned by digest, declared deterministic. */
export function canarySpec(images: LocalImages, paymentToken: 'eth' | 'stable', iterations = 100_000, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    title: `canary ${paymentToken}`,
    image: images.canary.reference,
    command: ['sha256-chain', String(iterations)],
    workloadType: 'batch',
    gpu: { count: 1 },
    maxRuntimeSeconds: 600,
    maxPricePerGpuHour: MAX_PRICE_USD,
    paymentToken,
    deterministic: true,
    ...extra,
  };
}

/** A job in the busybox test image, pinned by digest, running `sh -c script`. */
export function busyboxSpec(images: LocalImages, script: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    title: 'busybox',
    image: images.busybox.reference,
    command: ['sh', '-c', script],
    workloadType: 'batch',
    gpu: { count: 1 },
    maxRuntimeSeconds: 600,
    maxPricePerGpuHour: MAX_PRICE_USD,
    paymentToken: 'stable',
    ...extra,
  };
}

/**
 * A shell loop printing `out-<i>` on stdout and (unless `stderr` is false) `err-<i>` on stderr,
 * `count` times, pausing `pauseUs` µs after every `perPause` lines (1 by default): each pause is
 * a fork of busybox's `usleep`, so a fast stream pauses every few lines rather than every line.
 */
export function numberedLines(count: number, pauseUs: number, options: { stderr?: boolean; perPause?: number } = {}): string {
  const err = options.stderr === false ? '' : ' echo err-$i >&2;';
  const perPause = options.perPause ?? 1;
  const pause = perPause === 1 ? `usleep ${pauseUs};` : `if [ $((i % ${perPause})) -eq 0 ]; then usleep ${pauseUs}; fi;`;
  return `i=0; while [ $i -lt ${count} ]; do echo out-$i;${err} i=$((i+1)); ${pause} done`;
}

export const expected = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
