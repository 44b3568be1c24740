import { errorText } from '@gpufarm/shared';
import { ChallengeError, challengeCancelled, unknownRows, type ChallengeSpec, type GpuChallenge } from './challenge.js';
import { GpuBenchError, GpuBenchSession, gpuBenchChallengeArgs, type GpuBenchProcess } from './gpu-bench-session.js';

/**
 * A challenge run by gpu-bench on real GPUs, wherever `start` runs the program with the
 * arguments it is given (a container on a farm, `container-challenge.ts`; a local process in the
 * tests). The program runs from `prepare` until its openings are sent, or until `cancel`.
 *
 * @param name what runs, as errors name it (`gpu-bench`, `the challenge container`)
 */
export function gpuBenchChallenge(spec: ChallengeSpec, start: (args: string[]) => Promise<GpuBenchProcess>, name = 'gpu-bench'): GpuChallenge {
  let starting: Promise<GpuBenchProcess> | null = null;
  let session: GpuBenchSession | null = null;
  let cancelled = false;

  /** A step's failure as the challenge's: cancelled when `cancel()` came first. */
  const step = async <T>(work: Promise<T>): Promise<T> => {
    try {
      const value = await work;
      if (cancelled) throw challengeCancelled();
      return value;
    } catch (err) {
      if (cancelled) throw challengeCancelled();
      if (err instanceof ChallengeError) throw err;
      throw new ChallengeError('challenge_failed', err instanceof GpuBenchError ? err.message : `${name} failed: ${errorText(err)}`, { cause: err });
    }
  };
  const failWith = async (message: string): Promise<never> => {
    await session?.stop().catch(() => undefined);
    throw new ChallengeError('challenge_failed', message);
  };
  const running = (): GpuBenchSession => {
    if (session === null) throw new ChallengeError('challenge_failed', 'the challenge was not prepared');
    return session;
  };

  return {
    async prepare() {
      if (cancelled) throw challengeCancelled();
      starting = start(gpuBenchChallengeArgs(spec));
      const program = await step(starting.catch((err: unknown) => {
        throw new ChallengeError('challenge_failed', `${name} could not be started: ${errorText(err)}`, { cause: err });
      }));
      session = new GpuBenchSession(program, name);
      const ready = await step(session.ready());
      const asked = spec.gpus.map((g) => g.uuid.toLowerCase()).sort().join(', ');
      const seen = ready.gpus.map((g) => g.uuid.toLowerCase()).sort().join(', ');
      if (seen !== asked) await failWith(`${name} is ready on ${seen}, not on the challenge's GPUs (${asked})`);
    },

    async go(seed) {
      const commit = await step(running().go(seed));
      const short = commit.find((c) => c.roots.length !== spec.rounds * 64);
      if (short) await failWith(`${name} committed ${short.roots.length / 64} roots for ${short.uuid}, not the challenge's ${spec.rounds}`);
      return commit;
    },

    async open(rows) {
      const current = running();
      const unknown = unknownRows(spec, rows);
      if (unknown) await failWith(unknown);
      const openings = await step(current.open(rows));
      // The program exits by itself once it printed them; stopping frees its container.
      await current.stop();
      return openings;
    },

    async cancel() {
      cancelled = true;
      if (session) await session.stop().catch(() => undefined);
      else if (starting) await starting.then((p) => p.stop(), () => undefined).catch(() => undefined);
    },
  };
}
