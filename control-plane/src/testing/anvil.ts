import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { LineTail, systemEnvironment, type ChildExit } from '@gpufarm/shared/node';

/** anvil's well-known development accounts (mnemonic "test test … junk"): never use them on a real network. */
export const ANVIL_ACCOUNTS = [
  { address: '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266', privateKey: '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80' },
  { address: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8', privateKey: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d' },
  { address: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC', privateKey: '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a' },
  { address: '0x90F79bf6EB2c4f870365E785982E1f101E93b906', privateKey: '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6' },
  { address: '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65', privateKey: '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a' },
] as const satisfies readonly { address: `0x${string}`; privateKey: `0x${string}` }[];

export interface Anvil {
  rpcUrl: string;
  pid: number;
  /** Resolves when anvil exited, however it ended. */
  exited: Promise<ChildExit>;
  /** The last lines it printed. */
  lastLines(): string[];
  /** Stops this anvil (SIGTERM to its pid) and waits for it to exit. */
  stop(): Promise<void>;
}

/** The anvil binary inside `@foundry-rs/anvil`'s platform package (npm may skip its install script). */
export function anvilBinary(): string {
  const require = createRequire(import.meta.url);
  const platformPackage = `@foundry-rs/anvil-${process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
  return join(dirname(require.resolve(`${platformPackage}/package.json`)), 'bin', 'anvil');
}

/**
 * Starts anvil as a child process on a free port (`--port 0`, read back from its output) with
 * the given chain id, and resolves once it listens. Throws when it exits or does not listen
 * within `timeoutMs`. `detached`: in a process group of its own, so a terminal's Ctrl-C reaches
 * only its parent, which stops it in order.
 */
export async function startAnvil(options: { chainId: number; host?: string; port?: number; timeoutMs?: number; args?: string[]; detached?: boolean }): Promise<Anvil> {
  const host = options.host ?? '127.0.0.1';
  const child: ChildProcess = spawn(
    anvilBinary(),
    ['--host', host, '--port', String(options.port ?? 0), '--chain-id', String(options.chainId), ...(options.args ?? [])],
    // anvil needs none of its parent's settings, and some parents hold secrets.
    { env: systemEnvironment(), stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached ?? false },
  );
  const exited = new Promise<ChildExit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const tail = new LineTail();
  child.stdout?.on('data', (chunk: Buffer) => tail.push(chunk));
  child.stderr?.on('data', (chunk: Buffer) => tail.push(chunk));
  const rpcUrl = await new Promise<string>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => fail(new Error(`anvil did not listen within ${options.timeoutMs ?? 10_000} ms:\n${output.slice(-2000)}`)), options.timeoutMs ?? 10_000);
    const fail = (err: Error) => {
      clearTimeout(timer);
      child.kill('SIGTERM');
      reject(err);
    };
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /Listening on ([\d.]+|\[[^\]]+\]):(\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        resolve(`http://${match[1]}:${match[2]}`);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', (err) => fail(new Error(`anvil failed to start: ${err.message}`, { cause: err })));
    child.once('exit', (code) => fail(new Error(`anvil exited with ${String(code)} before listening:\n${output.slice(-2000)}`)));
  });
  // However this process ends (short of SIGKILL), anvil goes with it.
  const killOnExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', killOnExit);
  return {
    rpcUrl,
    pid: child.pid!,
    exited,
    lastLines: () => tail.lines(),
    stop: async () => {
      process.off('exit', killOnExit);
      killOnExit();
      await exited;
    },
  };
}
