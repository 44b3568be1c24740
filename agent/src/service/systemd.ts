import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * The systemd unit of the agent (`systemdUnit` is pure), written by `gf-agent install-service`
 * and, through it, by the .deb's build. The agent runs as root by default because it talks to the Docker socket and
 * loop-mounts output file systems; another user gets the `docker` group for the socket and
 * CAP_SYSLOG for the kernel log, and jobs' `/output` falls back to the watchdog. `Restart=always` brings it back after a crash, and
 * since containers outlive the agent (they are found again by label), a restart costs a running
 * job nothing.
 */
export interface UnitOptions {
  /** The command line that starts the daemon, such as `/usr/local/bin/gf-agent run`. */
  execStart: string;
  /** `--config` passed to the daemon, when not the default file. */
  configPath: string | null;
  stateDir: string;
  user: string;
  /** A `file://` URL of the agent's README, when there is one to point at. */
  documentation: string | null;
}

export function systemdUnit(o: UnitOptions): string {
  const exec = o.configPath ? `${o.execStart} --config ${o.configPath}` : o.execStart;
  return `# gpufarm agent, written by "gf-agent install-service".
[Unit]
Description=gpufarm agent (gf-agent): rents this machine's GPUs by the job
${o.documentation ? `Documentation=${o.documentation}\n` : ''}After=network-online.target docker.service
Wants=network-online.target
Requires=docker.service

[Service]
Type=simple
User=${o.user}
${o.user === 'root' || o.user === '0' ? '' : 'SupplementaryGroups=docker\n# Reads the driver\'s XID errors in /dev/kmsg, which kernel.dmesg_restrict keeps from other users.\nAmbientCapabilities=CAP_SYSLOG\n'}ExecStart=${exec}
# Its log is JSON lines on stdout, one journal entry each: journalctl -u gf-agent -o cat | jq
Restart=always
RestartSec=5
# Containers outlive the agent: stop only the daemon, never the jobs it supervises.
KillMode=process
TimeoutStopSec=30
Environment=GF_AGENT_STATE_DIR=${o.stateDir}
StateDirectory=${o.stateDir.startsWith('/var/lib/') ? o.stateDir.slice('/var/lib/'.length) : 'gf-agent'}
StateDirectoryMode=0700
LimitNOFILE=65536

[Install]
WantedBy=multi-user.target
`;
}

/**
 * The README beside the package the running code belongs to (the nearest folder above it with a
 * package.json: `dist/` in the installed package, `src/service/` here), as a `file://` URL.
 */
export function packageReadme(from: string = import.meta.url): string | null {
  for (let dir = dirname(fileURLToPath(from)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return existsSync(join(dir, 'README.md')) ? pathToFileURL(join(dir, 'README.md')).href : null;
    if (dirname(dir) === dir) return null;
  }
}
