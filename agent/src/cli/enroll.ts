import { AGENT_ENROLL_PATH, AGENT_PROTOCOL_VERSION, enrollmentTokenSchema, enrollResponseSchema, errorText, type EnrollRequest } from '@gpufarm/shared';
import { ensureStateDir, newMachineKeyPair, readMachineFile, stateFiles, writeFileAtomic, type MachineFile } from '../config/state.js';
import type { AgentConfig } from '../config/config.js';
import { toWireInventory } from '../inventory/snapshot.js';
import { AGENT_VERSION, inventoryMonitor } from './context.js';

export interface EnrollOptions {
  server: string;
  token: string;
  force: boolean;
}

/**
 * `gf-agent enroll`: makes an ed25519 key pair, sends the public key and the inventory with the
 * one-time `gfe_` token, and stores the `gfa_` machine token and the private key, both 0600,
 * in the state dir. Refuses to replace an existing enrollment without `--force`.
 */
export async function enroll(config: AgentConfig, options: EnrollOptions, log: (line: string) => void): Promise<MachineFile> {
  const token = enrollmentTokenSchema.safeParse(options.token);
  if (!token.success) throw new Error(`--token: ${token.error.issues[0]?.message}`);
  let server: URL;
  try {
    server = new URL(options.server);
    if (server.protocol !== 'http:' && server.protocol !== 'https:') throw new Error('not http(s)');
  } catch {
    throw new Error(`--server: must be the control plane's http(s) URL, got ${JSON.stringify(options.server)}`);
  }
  const existing = readMachineFile(config.stateDir);
  if (existing && !options.force) throw new Error(`already enrolled as machine ${existing.machineId} with ${existing.server} (state in ${config.stateDir}); pass --force to enroll again`);

  ensureStateDir(config.stateDir);
  const files = stateFiles(config.stateDir);
  const keys = newMachineKeyPair();
  const snapshot = await inventoryMonitor(config, { probe: true }).refresh();
  const body: EnrollRequest = {
    enrollmentToken: token.data,
    publicKeyPem: keys.publicKeyPem,
    agentVersion: AGENT_VERSION,
    protocolVersion: AGENT_PROTOCOL_VERSION,
    inventory: toWireInventory(snapshot),
  };
  const url = new URL(AGENT_ENROLL_PATH, server).toString();
  log(`enrolling with ${url} (${snapshot.detected.length} GPU(s), ${snapshot.health.status})`);
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    throw new Error(`cannot reach ${url}: ${cause?.code ?? errorText(err)}`, { cause: err });
  }
  const text = await res.text();
  if (res.status !== 201 && res.status !== 200) {
    let message = text.slice(0, 300);
    try {
      message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
    } catch {
      // not JSON: show the text as it came
    }
    throw new Error(`enrollment refused (HTTP ${res.status}): ${message}`);
  }
  const parsed = enrollResponseSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`the control plane answered enrollment with an unexpected body: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
  writeFileAtomic(files.privateKey, keys.privateKeyPem, 0o600);
  const machine: MachineFile = { server: server.toString().replace(/\/$/, ''), machineId: parsed.data.machineId, machineToken: parsed.data.machineToken, publicKeyPem: keys.publicKeyPem, enrolledAt: new Date().toISOString() };
  writeFileAtomic(files.machine, `${JSON.stringify(machine, null, 2)}\n`, 0o600);
  log(`enrolled as machine ${machine.machineId}; token and key stored in ${config.stateDir} (mode 0600). Start the agent: gf-agent run`);
  return machine;
}
