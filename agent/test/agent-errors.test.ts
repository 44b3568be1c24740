import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { GpufarmError } from '@gpufarm/shared';
import { ArtifactTooLargeError } from '../src/artifacts/pack.js';
import { UploadError } from '../src/artifacts/upload.js';
import { ConfigError, loadConfig } from '../src/config/config.js';
import { NvidiaSmiParseError, parseNvidiaSmiXml } from '../src/inventory/nvidia-smi-xml.js';
import { parseSimulatedGpus, SimulatedGpuSpecError } from '../src/inventory/simulated.js';
import { ContainerConfigError } from '../src/runtime/container-config.js';
import { DetachedError, RuntimeError } from '../src/job/errors.js';

/** The error `fn` throws, or a failure when it throws none. */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('nothing was thrown');
}

t.test('default: every agent error is a GpufarmError with its own name, a code and whether a retry can help', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-agent-errors-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const toml = join(dir, 'agent.toml');
  writeFileSync(toml, 'heartbeat_interval_seconds = 0\n');
  const cases: Array<[unknown, string, string, boolean]> = [
    [new RuntimeError('pull_failed', 'x'), 'RuntimeError', 'pull_failed', true],
    [new DetachedError('asg_1'), 'DetachedError', 'detached', false],
    [new ContainerConfigError('conflict', 'x'), 'ContainerConfigError', 'conflict', false],
    [thrown(() => loadConfig({ path: toml, env: {} })), 'ConfigError', 'invalid_config', false],
    [thrown(() => parseNvidiaSmiXml('<html>nope</html>')), 'NvidiaSmiParseError', 'nvidia_smi_unreadable', false],
    [thrown(() => parseSimulatedGpus('2 h100')), 'SimulatedGpuSpecError', 'invalid_simulated_gpus', false],
    [new UploadError('x', true, 503), 'UploadError', 'upload_failed', true],
    [new ArtifactTooLargeError(10, '/output'), 'ArtifactTooLargeError', 'artifact_too_large', false],
  ];
  for (const [err, name, code, retryable] of cases) {
    t.ok(err instanceof GpufarmError, `${name} is a GpufarmError`);
    t.match(err, { name, code, retryable, details: [] }, name);
  }
  t.ok(cases[3]![0] instanceof ConfigError);
  t.ok(cases[4]![0] instanceof NvidiaSmiParseError);
  t.ok(cases[5]![0] instanceof SimulatedGpuSpecError);
});

t.test('behavior: retryability is a property each error sets where it starts', async (t) => {
  t.equal(new RuntimeError('digest_mismatch', 'x').retryable, false, 'a digest mismatch is the same on every machine');
  for (const code of ['pull_failed', 'input_failed', 'create_failed', 'upload_failed', 'lost', 'internal'] as const) {
    t.equal(new RuntimeError(code, 'x').retryable, true, code);
  }
  t.equal(new UploadError('PUT answered HTTP 400', false, 400).retryable, false, 'an upload the server refused');
  const cause = new Error('socket hang up');
  const runtime = new RuntimeError('create_failed', 'creating the container failed: socket hang up', { cause });
  t.equal(runtime.cause, cause, 'the cause is kept');
  t.equal(runtime.message, 'creating the container failed: socket hang up');
});
