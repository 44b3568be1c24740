import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { freePort, LineTail, ownChild, systemEnvironment } from '@gpufarm/shared/node';

/** What to run when Debian's prometheus is missing (scripts/test-env.sh installs it as root). */
export const PROMETHEUS_INSTALL_HINT = 'Prometheus is not installed: run sudo apt-get update && sudo apt-get install -y --no-install-recommends prometheus (or, as root, bash scripts/test-env.sh)';

/** A Prometheus of the test's own: generated config, storage in the test's folder, a free port. */
export interface TestPrometheus {
  url: string;
  pid: number;
  /** Runs an instant PromQL query; the samples' labels and values. */
  query(promql: string): Promise<Array<{ metric: Record<string, string>; value: number }>>;
  stop(): Promise<void>;
}

const queryAnswer = z.object({
  status: z.literal('success'),
  data: z.object({ resultType: z.literal('vector'), result: z.array(z.object({ metric: z.record(z.string(), z.string()), value: z.tuple([z.number(), z.string()]) })) }),
});

/**
 * Starts `prometheus` scraping each job's targets every second (`metrics_path` /metrics), with
 * its TSDB under `dir`; resolves once it answers `/-/ready`. Stopped by its pid (`stop`).
 */
export async function startPrometheus(dir: string, jobs: ReadonlyArray<{ name: string; targets: string[] }>): Promise<TestPrometheus> {
  if (spawnSync('prometheus', ['--version']).status !== 0) throw new Error(PROMETHEUS_INSTALL_HINT);
  const port = await freePort();
  const configFile = join(dir, 'prometheus.yml');
  mkdirSync(join(dir, 'tsdb'), { recursive: true });
  // JSON is YAML: no YAML writer needed.
  writeFileSync(
    configFile,
    JSON.stringify({
      global: { scrape_interval: '1s', scrape_timeout: '900ms', evaluation_interval: '1s' },
      scrape_configs: jobs.map((job) => ({ job_name: job.name, metrics_path: '/metrics', static_configs: [{ targets: job.targets }] })),
    }),
  );
  const child = spawn('prometheus', [`--config.file=${configFile}`, `--storage.tsdb.path=${join(dir, 'tsdb')}`, `--web.listen-address=127.0.0.1:${port}`], {
    env: systemEnvironment(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const owned = ownChild(child);
  const tail = new LineTail();
  child.stdout.on('data', (chunk: Buffer) => tail.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => tail.push(chunk));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (!owned.running()) throw new Error(`prometheus exited before it was ready:\n${tail.lines().join('\n')}`);
    if ((await fetch(`${url}/-/ready`).then((r) => r.status, () => 0)) === 200) break;
    if (Date.now() > deadline) {
      await owned.stop();
      throw new Error(`prometheus was not ready within 30 s:\n${tail.lines().join('\n')}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    pid: child.pid!,
    async query(promql) {
      const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const answer = queryAnswer.parse(await res.json());
      return answer.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
    },
    stop: () => owned.stop(),
  };
}
