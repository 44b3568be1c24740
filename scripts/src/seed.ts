import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '@gpufarm/control-plane/config';
import { migrate, openDatabase } from '@gpufarm/control-plane/db';
import { syncCatalog } from '@gpufarm/control-plane/fleet';
import { seedFleet } from '@gpufarm/control-plane/testing';
import { UsageError } from './usage-error.js';
import { errorText } from '@gpufarm/shared';

const USAGE = `usage: npm run seed -- --machines N [--seed S]

Inserts a simulated fleet (farms, machines, GPUs, 30-day uptimes) into the control plane's
database: PostgreSQL when DATABASE_URL is set, otherwise the embedded database in
\${GF_DATA_DIR:-.gpufarm}/db. The same seed gives the same fleet.

  --machines N   machines to insert, 1 to 1000000
  --seed S       PRNG seed, an integer (default 4663)`;

function integer(name: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return Number(value);
}

function parse(argv: string[]): { machines: number; seed: number | undefined } | null {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { machines: { type: 'string' }, seed: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new UsageError(errorText(err));
  }
  if (values.help) return null;
  const machines = integer('machines', values.machines, 1, 1_000_000);
  if (machines === undefined) throw new UsageError('--machines is required');
  return { machines, seed: integer('seed', values.seed, 0, 2 ** 32 - 1) };
}

async function main(): Promise<void> {
  const args = parse(process.argv.slice(2));
  if (!args) {
    console.log(USAGE);
    return;
  }
  const config = loadConfig();
  const db = await openDatabase(config);
  try {
    await migrate(db);
    await syncCatalog(db);
    const started = performance.now();
    const seeded = await seedFleet(db, { machines: args.machines, ...(args.seed === undefined ? {} : { seed: args.seed }) });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    const where = db.kind === 'postgres' ? 'PostgreSQL (DATABASE_URL)' : `the embedded database in ${join(config.dataDir, 'db')}`;
    console.log(`seeded a simulated fleet into ${where} in ${seconds} s:
  farms         ${seeded.farms}
  machines      ${seeded.machines} (${seeded.offline} not online, ${seeded.unpriced} online without a price)
  GPUs          ${seeded.gpus} (${seeded.busyGpus} busy)
  regions       ${seeded.regions}
  uptime days   ${seeded.uptimeDays}`);
  } finally {
    await db.close();
  }
}

main().catch((err: unknown) => {
  if (err instanceof UsageError) {
    console.error(`npm run seed: ${err.message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (err instanceof ConfigError) console.error(`npm run seed: ${err.message}`);
  else console.error(`npm run seed failed: ${errorText(err)}`);
  process.exit(1);
});
