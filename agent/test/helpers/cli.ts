import { execFile } from 'node:child_process';
import { testCommand } from '@gpufarm/shared/build/test-bundles';

const [NODE, ...GF_AGENT] = testCommand('agent');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real `gf-agent` command as a child process with only the given GF_AGENT_* settings. */
export function gfAgent(args: string[], env: Record<string, string>): Promise<CliResult> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GF_AGENT_')));
  return new Promise((resolve) => {
    execFile(NODE, [...GF_AGENT, ...args], { env: { ...base, ...env }, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
