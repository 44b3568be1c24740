import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { startControlPlaneChild, type ControlPlaneChild } from '../control-plane-child.js';
import { startHaproxy, waitForServersUp, type HaproxyProcess } from './haproxy.js';
import { errorText } from '@gpufarm/shared';

/** A TCP port on 127.0.0.1: `preferred` when it is free (0: any free one); throws when `preferred` is taken. */
export async function listenablePort(preferred = 0): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(preferred, '127.0.0.1', resolve);
  }).catch((err: unknown) => {
    throw new Error(`port ${preferred} on 127.0.0.1 is taken (${errorText(err)})`, { cause: err });
  });
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (!address || typeof address === 'string') throw new Error('could not find a free port');
  return address.port;
}

/** One control-plane replica behind HAProxy. */
export interface Replica {
  /** Its server name in HAProxy (`cp1`, `cp2`, …). */
  name: string;
  url: string;
  /** The running process (replaced by `restart`). */
  child: ControlPlaneChild;
  /** Starts it again on the same port (after it died); HAProxy takes it back once it answers. */
  restart(): Promise<ControlPlaneChild>;
}

export interface ReplicaSet {
  /** HAProxy's address: what clients and agents use. */
  url: string;
  /** HAProxy's stats page (append `;csv`). */
  statsUrl: string;
  haproxy: HaproxyProcess;
  replicas: Replica[];
  /** Stops HAProxy, then every replica (SIGTERM to their pids). */
  stop(): Promise<void>;
}

export interface ReplicaSetOptions {
  count: number;
  /** HAProxy's config and each replica's data folder (`<dir>/cpN`) go here. */
  dir: string;
  /** Every replica's environment (DATABASE_URL, the chain, the artifact store, …); PORT, HOST, GF_DATA_DIR and GF_PUBLIC_URL are set per replica. */
  env: NodeJS.ProcessEnv;
  /** Ports for HAProxy's front, its stats and the replicas (`count` of them); 0 or absent: free ones. */
  ports?: { front?: number; stats?: number; replicas?: readonly number[] };
  /** See `HaproxyConfigOptions.keepClientForwardedFor`. */
  keepClientForwardedFor?: boolean;
  /** Each line a replica (`cpN`) or HAProxy (`haproxy`) prints. */
  log(name: string, line: string): void;
}

/**
 * `count` control-plane replicas (`control-plane/src/main.ts`, each its own process, on one
 * database given by `env`) and HAProxy in front of them (`haproxy.ts`), every replica with
 * `GF_PUBLIC_URL` at HAProxy and `GF_TRUST_PROXY`. Replicas start one after the other, so the
 * first applies the migrations. Resolves once HAProxy sees every replica up; on a failure what
 * was started is stopped.
 */
export async function startReplicaSet(options: ReplicaSetOptions): Promise<ReplicaSet> {
  const front = await listenablePort(options.ports?.front ?? 0);
  const stats = await listenablePort(options.ports?.stats ?? 0);
  const url = `http://127.0.0.1:${front}`;
  const replicas: Replica[] = [];
  const stopReplicas = async () => {
    for (const replica of [...replicas].reverse()) await replica.child.stop();
  };
  try {
    for (let i = 1; i <= options.count; i++) {
      const name = `cp${i}`;
      const port = await listenablePort(options.ports?.replicas?.[i - 1] ?? 0);
      const dataDir = join(options.dir, name);
      mkdirSync(dataDir, { recursive: true });
      const env: NodeJS.ProcessEnv = { ...options.env, PORT: String(port), HOST: '127.0.0.1', GF_DATA_DIR: dataDir, GF_PUBLIC_URL: url, GF_TRUST_PROXY: 'true' };
      const start = () => startControlPlaneChild({ env, log: (line) => options.log(name, line) });
      const replica: Replica = {
        name,
        url: `http://127.0.0.1:${port}`,
        child: await start(),
        restart: async () => (replica.child = await start()),
      };
      replicas.push(replica);
    }
    const haproxy = await startHaproxy({
      dir: options.dir,
      bind: `127.0.0.1:${front}`,
      statsBind: `127.0.0.1:${stats}`,
      servers: replicas.map((r) => ({ name: r.name, address: new URL(r.url).host })),
      keepClientForwardedFor: options.keepClientForwardedFor,
      detached: true,
      log: (line) => options.log('haproxy', line),
    });
    await waitForServersUp(haproxy.statsUrl).catch(async (err: unknown) => {
      await haproxy.stop();
      throw err;
    });
    return {
      url,
      statsUrl: haproxy.statsUrl,
      haproxy,
      replicas,
      stop: async () => {
        await haproxy.stop();
        await stopReplicas();
      },
    };
  } catch (err) {
    await stopReplicas();
    throw err;
  }
}
