#!/usr/bin/env node
import { ConfigError, loadConfig, type Config } from './config.js';
import { migrate } from './db/migrate.js';
import { openDatabase } from './db/open.js';
import { createLogger } from './logger.js';
import { closeOnSignals, startControlPlane } from './server.js';
import { errorText } from '@gpufarm/shared';

/** `migrate`: applies the pending migrations to the configured database, says which, and exits. */
async function runMigrate(config: Config): Promise<void> {
  const db = await openDatabase(config);
  try {
    const { applied } = await migrate(db);
    console.log(applied.length === 0 ? 'gpufarm control plane: no pending migrations' : `gpufarm control plane: applied ${applied.length} migration(s):\n${applied.map((name) => `  ${name}`).join('\n')}`);
  } finally {
    await db.close();
  }
}

/**
 * The control plane process: configuration from the environment, then serve until a signal
 * (no argument) or apply the migrations and exit (`migrate`).
 * A supervisor (systemd, or `npm start` through the IPC channel it opens) learns the URL once
 * it listens, and restarts the process when it exits.
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`gpufarm control plane: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
  const [command, ...extra] = process.argv.slice(2);
  if (command === 'migrate' && extra.length === 0) return runMigrate(config);
  if (command !== undefined) {
    console.error(`gpufarm control plane: unknown arguments ${JSON.stringify(process.argv.slice(2).join(' '))}; run it with none to serve, or with \`migrate\``);
    process.exit(2);
  }
  // The one logger of the process: requests, loops and these lines, as JSON lines on stdout.
  const log = createLogger({ level: config.logLevel });
  // A start that fails (an unmigrated database, a port in use) is told to the person on stderr below.
  const controlPlane = await startControlPlane(config, { logger: log });
  // A promise nobody awaited failed: the request or loop it belonged to already answered or
  // goes on, so the process keeps serving.
  process.on('unhandledRejection', (reason) => log.error({ err: reason }, 'unhandled promise rejection; the control plane keeps running'));
  // After an uncaught exception the process state is unknown: log it and exit for the supervisor to restart.
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception; the control plane exits and its supervisor restarts it');
    process.exit(70);
  });
  closeOnSignals(controlPlane);
  // Under `npm start` the IPC channel is the parent: when it is gone, so is the marketplace.
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  process.send?.({ type: 'listening', url: controlPlane.url, pid: process.pid });
}

// Before the server serves (reading the configuration, `migrate`, a failed start): a plain line on stderr.
main().catch((err: unknown) => {
  console.error(`gpufarm control plane failed to start: ${errorText(err)}`);
  process.exit(1);
});
