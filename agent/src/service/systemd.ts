/**
 * The systemd unit of the agent (pure). The agent runs as root by default because it talks to
 * the Docker socket and loop-mounts output file systems; `Restart=always` brings it back after a
 * crash, and since containers outlive the agent (they are found again by label), a restart
 * costs a running job nothing.
 */
export interface UnitOptions {
  /** The command line that starts the daemon, such as `/usr/local/bin/gf-agent run`. */
  execStart: string;
  /** `--config` passed to the daemon, when not the default file. */
  configPath: string | null;
  stateDir: string;
  user: string;
}

export function systemdUnit(o: UnitOptions): string {
  const exec = o.configPath ? `${o.execStart} --config ${o.configPath}` : o.execStart;
  return `# gpufarm agent, written by "gf-agent install-service".
[Unit]
Description=gpufarm agent (gf-agent): rents this machine's GPUs by the job
Documentation=https://github.com/gpufarm/gpufarm#agent
After=network-online.target docker.service
Wants=network-online.target
Requires=docker.service

[Service]
Type=simple
User=${o.user}
ExecStart=${exec}
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
