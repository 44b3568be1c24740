import { randomBytes } from 'node:crypto';
import { openPostgres } from '@gpufarm/control-plane/db';

export interface BenchDatabase {
  /** The fresh database's URL. */
  url: string;
  name: string;
  /** Drops the database (forcing out any connection left). */
  drop(): Promise<void>;
}

async function onServer(serverUrl: string, sql: string): Promise<void> {
  const admin = openPostgres(serverUrl, { max: 1 });
  try {
    await admin.exec(sql);
  } finally {
    await admin.close();
  }
}

/** Creates `gf_bench_<random>` on the server of `serverUrl` (its role needs CREATEDB). */
export async function createBenchDatabase(serverUrl: string): Promise<BenchDatabase> {
  const name = `gf_bench_${randomBytes(5).toString('hex')}`;
  await onServer(serverUrl, `CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), name, drop: () => onServer(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}
