import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { EVENT_LOOP_SAMPLE_MS } from '@gpufarm/shared/node';
import type { AgentLogRefusal } from '../agent-gateway/lifecycle-port.js';
import type { ChainHealth } from '../chain/health.js';
import type { Database } from '../db/database.js';
import { lastScannedBlock } from '../jobs/escrow-worker.js';
import type { EscrowDeps } from '../jobs/funding.js';
import type { MatcherMetrics } from '../matching/loop.js';
import type { StartPhaseMetrics } from '../phases/record.js';
import { countFleetGpus, countJobsByState, countMachinesByStatus, JOB_STATES_COUNTED } from './store.js';

/** Names start with this; units are in the names (seconds, bytes), counters end in `_total`. */
export const METRIC_PREFIX = 'gf_';

/** Route label of requests no route matched: raw URLs never become labels (unbounded). */
export const UNMATCHED_ROUTE = 'unmatched';

/** Sources read at scrape time; each is optional, and a metric without its source is left out. */
export interface ScrapeSources {
  db?: Database;
  escrow?: EscrowDeps | null;
  /** The escrow scan's first block: before its first scan the worker is behind by everything since it. */
  escrowStartBlock?: number;
  /** Agent links open on this replica. */
  agentLinks?: () => number;
}

/**
 * One control plane's metrics in a registry of its own (tests run several apps in one process).
 * Counters and histograms are fed by the hooks below; gauges of the database (jobs by state,
 * machines, fleet GPUs) and of the chain are read when Prometheus scrapes, so every replica
 * reports the same database figures (dashboards take max() of them).
 */
export interface ControlPlaneMetrics extends StartPhaseMetrics {
  registry: Registry;
  /** Counts an HTTP request by route pattern (or `unmatched`), method and status code. */
  httpRequest(labels: { method: string; route: string; code: number }, seconds: number): void;
  matcher: MatcherMetrics;
  logBytes(bytes: number): void;
  /** Counts agent log lines not stored as sent, by why (`AgentLogRefusal`). */
  agentLogLinesRefused(reason: AgentLogRefusal, lines: number): void;
  artifactBytes(bytes: number): void;
  /** Connects the scrape-time gauges to their sources (once, when the sources exist). */
  attach(sources: ScrapeSources): void;
}

/** A fresh registry with every control-plane metric; `server.ts` makes one per control plane. */
export function createControlPlaneMetrics(): ControlPlaneMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  let sources: ScrapeSources = {};
  const registers = [registry];

  const httpRequests = new Counter({
    name: `${METRIC_PREFIX}http_requests_total`,
    help: 'HTTP requests answered, by route pattern, method and status code.',
    labelNames: ['route', 'method', 'code'],
    registers,
  });
  const httpDuration = new Histogram({
    name: `${METRIC_PREFIX}http_request_duration_seconds`,
    help: 'Time from a request to its response, by route pattern, method and status code.',
    labelNames: ['route', 'method', 'code'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const matcherPass = new Histogram({
    name: `${METRIC_PREFIX}matcher_pass_duration_seconds`,
    help: 'Duration of matcher passes that looked at queued jobs.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const queueWait = new Histogram({
    name: `${METRIC_PREFIX}job_queue_wait_seconds`,
    help: 'Time a job waited in QUEUED before it was matched to a machine.',
    buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600],
    registers,
  });
  // One series per phase, as the job object names them (`START_PHASES`); `queued` is
  // `job_queue_wait_seconds` above, observed by the matcher. Buckets from a cached start (well
  // under a second) to a 30 GB pull on a slow link (an hour).
  const startPhase = new Histogram({
    name: `${METRIC_PREFIX}job_start_phase_seconds`,
    help: "Duration of each phase of a run, on the control plane's clock as it received the machine's reports: dispatch, pull, container, firstLog, run, upload.",
    labelNames: ['phase'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600],
    registers,
  });
  const logBytes = new Counter({ name: `${METRIC_PREFIX}log_bytes_total`, help: 'Bytes of job log text stored from agents.', registers });
  const agentLogLinesRefused = new Counter({
    name: `${METRIC_PREFIX}agent_log_lines_refused_total`,
    help: 'Agent log lines not stored as sent: dropped (assignment_ended past the grace, not_this_machine) or stored as the machine\'s stderr (system_stream).',
    labelNames: ['reason'],
    registers,
  });
  const artifactBytes = new Counter({ name: `${METRIC_PREFIX}artifact_bytes_total`, help: 'Bytes of artifacts stored (outputs, logs and inputs).', registers });

  new Gauge({
    name: `${METRIC_PREFIX}gateway_agent_links`,
    help: 'Agent WebSocket links open on this replica (sum() over replicas for the fleet).',
    registers,
    collect() {
      if (sources.agentLinks) this.set(sources.agentLinks());
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}jobs`,
    help: 'Jobs by state (from the database; the same on every replica).',
    labelNames: ['state'],
    registers,
    async collect() {
      if (!sources.db) return;
      const counts = await countJobsByState(sources.db);
      // Every state appears, at 0 when empty, so rate() and alerts see a series from the start.
      for (const state of JOB_STATES_COUNTED) this.set({ state }, counts.get(state) ?? 0);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}machines`,
    help: 'Enrolled and seeded machines by status (from the database).',
    labelNames: ['status'],
    registers,
    async collect() {
      if (!sources.db) return;
      this.reset();
      for (const [status, n] of await countMachinesByStatus(sources.db)) this.set({ status }, n);
    },
  });
  new Gauge({
    name: `${METRIC_PREFIX}fleet_gpus`,
    help: 'GPUs by catalog class and state: idle, busy, draining, or the machine status (offline, unhealthy, disabled).',
    labelNames: ['class', 'state'],
    registers,
    async collect() {
      if (!sources.db) return;
      this.reset();
      for (const row of await countFleetGpus(sources.db)) this.set({ class: row.classId, state: row.state }, row.gpus);
    },
  });
  /** The chain's gauges exist only with a chain: an `up` of 0 would page someone for a chain never configured. */
  const registerChainGauges = (escrow: EscrowDeps, db: Database | undefined, startBlock: number) => {
    const health: ChainHealth = escrow.health;
    new Gauge({
      name: `${METRIC_PREFIX}chain_rpc_up`,
      help: '1 when the last chain probe found the RPC on the right chain with the escrow deployed.',
      registers,
      collect() {
        this.set(health.current().ok ? 1 : 0);
      },
    });
    new Gauge({
      name: `${METRIC_PREFIX}chain_rpc_probe_duration_seconds`,
      help: 'Round trip of the last chain health probe.',
      registers,
      collect() {
        const probe = health.lastProbe();
        if (probe) this.set(probe.durationSeconds);
      },
    });
    if (!db) return;
    new Gauge({
      name: `${METRIC_PREFIX}escrow_worker_lag_blocks`,
      help: "Blocks the escrow event scan has yet to read: the chain head less its last block (any replica's).",
      registers,
      async collect() {
        const head = health.lastProbe()?.headBlock;
        if (head === null || head === undefined) return;
        const scanned = (await lastScannedBlock({ db, escrow })) ?? BigInt(startBlock) - 1n;
        this.set(Number(head > scanned ? head - scanned : 0n));
      },
    });
  };

  return {
    registry,
    httpRequest({ method, route, code }, seconds) {
      const labels = { method, route, code: String(code) };
      httpRequests.inc(labels);
      httpDuration.observe(labels, seconds);
    },
    matcher: {
      pass: (seconds) => matcherPass.observe(seconds),
      queueWait: (seconds) => queueWait.observe(seconds),
    },
    startPhase: (phase, seconds) => startPhase.observe({ phase }, seconds),
    logBytes: (bytes) => logBytes.inc(bytes),
    agentLogLinesRefused: (reason, lines) => agentLogLinesRefused.inc({ reason }, lines),
    artifactBytes: (bytes) => artifactBytes.inc(bytes),
    attach(next) {
      if (next.escrow && !sources.escrow) registerChainGauges(next.escrow, next.db ?? sources.db, next.escrowStartBlock ?? sources.escrowStartBlock ?? 0);
      sources = { ...sources, ...next };
    },
  };
}
