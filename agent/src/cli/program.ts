import { existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { Command, Option } from 'commander';
import { errorText, formatBytes, gpuVerdictLine, GPU_HEALTH_VERDICTS } from '@gpufarm/shared';
import { z } from 'zod';
import { ConfigError, DEFAULT_CONFIG_PATH, workDirOf } from '../config/config.js';
import { ensureStateDir, readJsonFile, readMachineFile, stateFiles, writeFileAtomic } from '../config/state.js';
import { runBenchmark } from '../benchmark/run.js';
import { measureDiskWriteMBps, measureSha256MBps } from '../benchmark/host-checks.js';
import { dockerGpuBenchmark } from '../benchmark/gpu-container.js';
import { prepareBenchmarkImage } from '../benchmark/gpu-bench-image.js';
import { formatDoctor, runDoctor } from '../doctor/checks.js';
import { systemDriverHost } from '../inventory/driver-host.js';
import { nvidiaSmiReader } from '../inventory/gpu-reader.js';
import { toWireInventory } from '../inventory/snapshot.js';
import { SimulatedGpuSpecError } from '../inventory/simulated.js';
import { packageReadme, systemdUnit } from '../service/systemd.js';
import { AGENT_VERSION, configFrom, dockerClient, dockerEndpoint, inventoryMonitor, simulateSpec, type GlobalOptions } from './context.js';
import { enroll } from './enroll.js';
import { fetchMachineView, machineViewLines, requestDrain, requireEnrollment, unenroll } from './machine.js';
import { agentLogger } from '../logger/logger.js';
import { runDaemon } from './run.js';

/** The verdict part of status.json (an older daemon wrote none). */
const verdictSchema = z.object({ verdict: z.enum(GPU_HEALTH_VERDICTS), reasons: z.array(z.string()) });
/** The image cache's part of status.json (an older daemon wrote none). */
const statusImageCacheSchema = z.object({ imageCache: z.object({ images: z.int().min(0), usedBytes: z.int().min(0), budgetBytes: z.int().min(0) }).nullable().default(null) });
const statusVerdictsSchema = z.object({
  gpuHealth: z.array(verdictSchema.extend({ index: z.int().min(0), uuid: z.string().nullable() })).default([]),
  machineVerdict: verdictSchema.nullable().default(null),
  kernelLogProblem: z.string().nullable().default(null),
});

const out = (line: string) => process.stdout.write(`${line}\n`);
const err = (line: string) => process.stderr.write(`${line}\n`);

/** A failure the user can fix: printed without a stack trace, exit code 1 (2 for configuration). */
function fail(error: unknown): never {
  if (error instanceof ConfigError) err(`gf-agent: configuration error:\n${error.message.split('\n').map((l) => `  ${l}`).join('\n')}`);
  else err(`gf-agent: ${errorText(error)}`);
  process.exit(exitCodeOf(error));
}

/** 2 for a configuration the user must fix, 1 for any other failure. */
function exitCodeOf(error: unknown): 1 | 2 {
  return error instanceof ConfigError || error instanceof SimulatedGpuSpecError ? 2 : 1;
}

function action<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (error) {
      fail(error);
    }
  };
}

/** The `gf-agent` command line. */
export function buildProgram(): Command {
  const program = new Command('gf-agent')
    .description('gpufarm agent: offers this machine\'s GPUs to the marketplace and runs the jobs it is given')
    .version(AGENT_VERSION)
    .option('-c, --config <file>', `configuration file, TOML or .json (default ${DEFAULT_CONFIG_PATH} when it exists; env GF_AGENT_CONFIG)`)
    .option('--state-dir <dir>', 'state directory: keys, machine token, log spill (env GF_AGENT_STATE_DIR; default /var/lib/gf-agent)')
    .option('--simulate-gpus <spec>', 'simulated mode on a machine without GPUs, such as "2x h100-80gb-sxm" (env GF_AGENT_SIMULATE_GPUS)')
    .showHelpAfterError();
  const globals = () => program.opts<GlobalOptions>();

  program
    .command('enroll')
    .description('register this machine with a control plane using a one-time enrollment token')
    .requiredOption('--server <url>', 'the control plane, such as https://farm.example.com')
    .requiredOption('--token <gfe_token>', 'the one-time enrollment token (gfe_…)')
    .option('--force', 'replace an existing enrollment', false)
    .action(action(async (opts: { server: string; token: string; force: boolean }) => {
      const config = configFrom(globals());
      await enroll(config, opts, out);
    }));

  program
    .command('run')
    .description('run the agent daemon: connect, report inventory and health, take assignments')
    .action(async () => {
      // The daemon's whole output is JSON lines (journald keeps one entry a line), its failure too.
      const logger = agentLogger();
      // A crash is a JSON line too (Node still prints its stack and exits as it would).
      process.on('uncaughtExceptionMonitor', (error, origin) => logger.fatal({ origin, stack: error instanceof Error ? error.stack : undefined }, errorText(error)));
      try {
        await runDaemon(configFrom(globals()), logger);
      } catch (error) {
        logger.fatal(error instanceof ConfigError ? `configuration error: ${error.message}` : errorText(error));
        process.exit(exitCodeOf(error));
      }
    });

  program
    .command('status')
    .description('show the enrollment, the earning verdict and GPU health the control plane sees, and what the running daemon last reported')
    .option('--json', 'print JSON')
    .action(action(async (opts: { json?: boolean }) => {
      const config = configFrom(globals());
      const machine = readMachineFile(config.stateDir);
      const status = readJsonFile(stateFiles(config.stateDir).status) as { pid?: number; link?: string; updatedAt?: string; health?: { status: string; reason: string | null } | null; lastHeartbeatAt?: string | null; lastDownReason?: string | null; running?: string[]; draining?: boolean } | null;
      let alive = false;
      if (status?.pid) {
        try {
          process.kill(status.pid, 0);
          alive = true;
        } catch {
          alive = false;
        }
      }
      // The control plane's view is the operator area's; an unreachable one leaves the local facts.
      let controlPlane: { machine: Awaited<ReturnType<typeof fetchMachineView>> | null; error: string | null } | null = null;
      if (machine) {
        try {
          controlPlane = { machine: await fetchMachineView(machine), error: null };
        } catch (e) {
          controlPlane = { machine: null, error: errorText(e) };
        }
      }
      const report = {
        enrolled: machine !== null,
        machineId: machine?.machineId ?? null,
        server: machine?.server ?? config.server,
        stateDir: config.stateDir,
        controlPlane,
        daemon: status ? { running: alive, ...status } : null,
      };
      if (opts.json) {
        out(JSON.stringify(report, null, 2));
        return;
      }
      out(machine ? `enrolled: machine ${machine.machineId} with ${machine.server} (since ${machine.enrolledAt})` : `not enrolled (state dir ${config.stateDir}): run "gf-agent enroll --server URL --token gfe_…"`);
      if (controlPlane?.machine) for (const line of machineViewLines(controlPlane.machine)) out(line);
      else if (controlPlane?.error) out(`control plane: ${controlPlane.error}`);
      if (!status) out('daemon: no status yet (start it with "gf-agent run" or "systemctl start gf-agent")');
      else {
        out(`daemon: ${alive ? `running (pid ${status.pid})` : `not running (last pid ${status.pid})`}, link ${status.link}, status of ${status.updatedAt}`);
        if (status.health) out(`health: ${status.health.status}${status.health.reason ? ` (${status.health.reason})` : ''}`);
        const verdicts = statusVerdictsSchema.safeParse(status);
        if (verdicts.success && verdicts.data.machineVerdict) {
          const m = verdicts.data.machineVerdict;
          out(`verdict: ${m.verdict}${m.verdict === 'failed' && m.reasons.length > 0 ? ` (${m.reasons[0]})` : ''}`);
          for (const g of verdicts.data.gpuHealth) out(`  ${gpuVerdictLine(g)}`);
        }
        if (verdicts.success && verdicts.data.kernelLogProblem) out(`kernel log: ${verdicts.data.kernelLogProblem}`);
        out(`last heartbeat: ${status.lastHeartbeatAt ?? 'none'}${status.lastDownReason ? `; last link problem: ${status.lastDownReason}` : ''}`);
        out(`assignments: ${status.running?.length ? status.running.join(', ') : 'none'}${status.draining ? ' (draining)' : ''}`);
        const cache = statusImageCacheSchema.safeParse(status);
        if (cache.success && cache.data.imageCache) {
          const c = cache.data.imageCache;
          out(`image cache: ${c.images} image${c.images === 1 ? '' : 's'}, ${formatBytes(c.usedBytes)} of ${formatBytes(c.budgetBytes)} (image_cache_bytes)`);
        }
      }
    }));

  program
    .command('drain')
    .description('take no new job on this machine; running jobs finish (the operator area shows it drained)')
    .option('--reason <text>', 'why, shown with the drain')
    .action(action(async (opts: { reason?: string }) => {
      const machine = requireEnrollment(configFrom(globals()));
      const view = await requestDrain(machine, { undrain: false, ...(opts.reason ? { reason: opts.reason } : {}) });
      out(`drained machine ${view.machineId}: it takes no new job; running jobs finish. Undo with "gf-agent undrain".`);
      for (const line of machineViewLines(view)) out(line);
    }));

  program
    .command('undrain')
    .description('take jobs again after a drain')
    .action(action(async () => {
      const machine = requireEnrollment(configFrom(globals()));
      const view = await requestDrain(machine, { undrain: true });
      out(`undrained machine ${view.machineId}: it takes jobs again.`);
      for (const line of machineViewLines(view)) out(line);
    }));

  program
    .command('unenroll')
    .description('remove this machine from the marketplace: its token is revoked, then the local enrollment is deleted')
    .option('-y, --yes', 'do not ask for confirmation', false)
    .action(action(async (opts: { yes: boolean }) => {
      const config = configFrom(globals());
      const machine = requireEnrollment(config);
      if (!opts.yes) {
        if (!process.stdin.isTTY) throw new Error('unenroll asks for confirmation on a terminal; pass --yes to unenroll without asking');
        const rl = createInterface({ input: process.stdin, output: process.stdout });
        const answer = await rl.question(`Unenroll machine ${machine.machineId} from ${machine.server}? Its token stops working and it is offered nowhere. [y/N] `);
        rl.close();
        if (!/^y(es)?$/i.test(answer.trim())) {
          out('not unenrolled');
          return;
        }
      }
      const done = await unenroll(config, machine);
      out(`unenrolled machine ${done.machineId} at ${done.unenrolledAt}; its token and key were removed from ${config.stateDir}. Stop the daemon: systemctl disable --now gf-agent`);
    }));

  program
    .command('inventory')
    .description('print the GPUs and host facts as JSON (what the control plane is told)')
    .option('--probe', 'also run the GPU container probe through Docker (health truth)', false)
    .option('--wire', 'print exactly the inventory message sent to the control plane (no GPUs while unhealthy)', false)
    .action(action(async (opts: { probe: boolean; wire: boolean }) => {
      const config = configFrom(globals());
      const snap = await inventoryMonitor(config, { probe: opts.probe }).refresh();
      const wire = toWireInventory(snap);
      out(JSON.stringify(opts.wire ? wire : { ...wire, gpus: snap.detected, offered: snap.health.status === 'healthy' }, null, 2));
    }));

  program
    .command('benchmark')
    .description('measure disk write and SHA-256 speed, and GPU matmul and memory bandwidth in the benchmark container; stores and prints the result')
    .option('--disk-mib <n>', 'MiB written by the disk check', '256')
    .option('--sha-mib <n>', 'MiB hashed by the SHA-256 check', '512')
    .action(action(async (opts: { diskMib: string; shaMib: string }) => {
      const config = configFrom(globals());
      const docker = dockerClient();
      // First use on this machine: the image is made before the GPUs are probed, so a problem
      // with it shows even while they are not offered.
      if (simulateSpec(config) === null) {
        err(await prepareBenchmarkImage(docker, config.benchmarkImage).catch((e: unknown) => `benchmark image: ${errorText(e)}`));
      }
      const snap = await inventoryMonitor(config, { probe: true }).refresh();
      const workDir = workDirOf(config);
      const result = await runBenchmark(
        {
          host: { diskWriteMBps: () => measureDiskWriteMBps(workDir, Number(opts.diskMib) * 1024 * 1024), sha256MBps: () => measureSha256MBps(Number(opts.shaMib) * 1024 * 1024) },
          gpu: dockerGpuBenchmark(docker, { image: config.benchmarkImage }),
          now: () => new Date(),
        },
        snap,
      );
      try {
        ensureStateDir(config.stateDir);
        writeFileAtomic(stateFiles(config.stateDir).benchmark, `${JSON.stringify(result, null, 2)}\n`, 0o644);
      } catch (e) {
        err(`could not store the result in ${config.stateDir}: ${errorText(e)}`);
      }
      out(JSON.stringify(result, null, 2));
    }));

  program
    .command('doctor')
    .description('check Docker, nvidia-smi, the driver libraries, the fabric manager, persistence mode, the NVIDIA container runtime, disk, clock and the control plane; say how to fix each')
    .option('--json', 'print JSON')
    .action(action(async (opts: { json?: boolean }) => {
      const config = configFrom(globals());
      const machine = (() => {
        try {
          return readMachineFile(config.stateDir);
        } catch {
          return null;
        }
      })();
      const checks = await runDoctor(
        { docker: dockerClient(), dockerEndpoint: dockerEndpoint(), gpus: nvidiaSmiReader({ command: config.nvidiaSmi }), driverHost: systemDriverHost({ hostRoot: config.hostRoot }), fetch, now: () => new Date() },
        { server: config.server ?? machine?.server ?? null, workDir: workDirOf(config), minFreeDiskBytes: config.minFreeDiskBytes, simulated: Boolean(config.simulateGpus) },
      );
      out(opts.json ? JSON.stringify(checks, null, 2) : formatDoctor(checks));
      if (checks.some((c) => c.status === 'fail')) process.exitCode = 1;
    }));

  program
    .command('install-service')
    .description('write a systemd unit for the agent and say how to enable it')
    .option('--path <file>', 'where to write the unit', '/etc/systemd/system/gf-agent.service')
    .option('--exec <command>', 'the command that starts the daemon', `${resolve(process.argv[1] ?? 'gf-agent')} run`)
    .option('--user <name>', 'the user the agent runs as (needs the Docker socket)', 'root')
    .option('--docs <url>', 'the unit\'s Documentation= (default: this package\'s README as a file:// URL)')
    .addOption(new Option('--force', 'overwrite an existing unit').default(false))
    .action(action(async (opts: { path: string; exec: string; user: string; docs?: string; force: boolean }) => {
      const config = configFrom(globals());
      if (existsSync(opts.path) && !opts.force) throw new Error(`${opts.path} exists; pass --force to overwrite it`);
      const unit = systemdUnit({ execStart: opts.exec, configPath: globals().config ? resolve(globals().config!) : null, stateDir: config.stateDir, user: opts.user, documentation: opts.docs ?? packageReadme() });
      mkdirSync(dirname(opts.path), { recursive: true });
      writeFileAtomic(opts.path, unit, 0o644);
      out(`wrote ${opts.path}. Enable and start it:\n  systemctl daemon-reload\n  systemctl enable --now ${opts.path.split('/').pop()!.replace(/\.service$/, '')}\nthen follow its log (JSON lines) with: journalctl -u ${opts.path.split('/').pop()!.replace(/\.service$/, '')} -f -o cat | jq`);
    }));

  return program;
}
