import { rmSync } from 'node:fs';
import {
  AGENT_MACHINE_DRAIN_PATH,
  AGENT_MACHINE_PATH,
  AGENT_MACHINE_UNENROLL_PATH,
  agentMachineViewSchema,
  agentUnenrollResponseSchema,
  earningLine,
  errorText,
  type AgentDrainRequest,
  type AgentMachineView,
  type AgentUnenrollResponse,
} from '@gpufarm/shared';
import type { z } from 'zod';
import type { AgentConfig } from '../config/config.js';
import { readMachineFile, stateFiles, type MachineFile } from '../config/state.js';

/**
 * The operator's commands on the machine (`gf-agent status | drain | undrain | unenroll`): each
 * asks the control plane with the machine token from the state dir. The control plane is the
 * truth: `status` prints the verdict the operator area shows, and `unenroll` forgets the local
 * enrollment only once the control plane agreed.
 */

/** The enrollment in the state dir; throws what to do when there is none. */
export function requireEnrollment(config: AgentConfig): MachineFile {
  const machine = readMachineFile(config.stateDir);
  if (!machine) throw new Error(`not enrolled (state dir ${config.stateDir}): run "gf-agent enroll --server URL --token gfe_…"`);
  return machine;
}

async function call<S extends z.ZodType>(machine: MachineFile, method: 'GET' | 'POST', path: string, body: unknown, schema: S): Promise<z.infer<S>> {
  const url = new URL(path, `${machine.server}/`).toString();
  let res: Response;
  try {
    res = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${machine.machineToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      // status waits for this before printing the local facts: a silent control plane must not hold it long.
      signal: AbortSignal.timeout(10_000),
    });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    throw new Error(`cannot reach ${url}: ${cause?.code ?? errorText(err)}`, { cause: err });
  }
  const text = await res.text();
  if (!res.ok) {
    let message = text.slice(0, 300);
    try {
      message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
    } catch {
      // not JSON: show the text as it came
    }
    throw new Error(`the control plane refused (HTTP ${res.status}): ${message}`);
  }
  const parsed = schema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`the control plane answered ${path} with an unexpected body: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

export function fetchMachineView(machine: MachineFile): Promise<AgentMachineView> {
  return call(machine, 'GET', AGENT_MACHINE_PATH, undefined, agentMachineViewSchema);
}

export function requestDrain(machine: MachineFile, request: AgentDrainRequest): Promise<AgentMachineView> {
  return call(machine, 'POST', AGENT_MACHINE_DRAIN_PATH, request, agentMachineViewSchema);
}

/** Unenrolls with the control plane, then removes the machine token and key from the state dir. */
export async function unenroll(config: AgentConfig, machine: MachineFile): Promise<AgentUnenrollResponse> {
  const done = await call(machine, 'POST', AGENT_MACHINE_UNENROLL_PATH, {}, agentUnenrollResponseSchema);
  const files = stateFiles(config.stateDir);
  for (const file of [files.machine, files.privateKey, files.status]) rmSync(file, { force: true });
  return done;
}

/** The lines `status` prints for the machine as the control plane sees it. */
export function machineViewLines(view: AgentMachineView): string[] {
  const lines = [`${earningLine(view.earning)}`, `state: ${view.state}${view.drainRequested ? ' (drain requested)' : ''}; farm ${view.farm.slug}`];
  if (view.gpus.length === 0) lines.push('GPUs: none offered');
  for (const gpu of view.gpus) lines.push(`GPU ${gpu.index}: ${gpu.verdict}${gpu.reasons.length > 0 ? ` (${gpu.reasons.join('; ')})` : ''}`);
  return lines;
}
