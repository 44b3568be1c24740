#!/usr/bin/env -S npx tsx
import { withDeploymentFile } from './chain/deployment-file.js';
import { ConfigError, loadConfig } from './config.js';
import { closeOnSignals, startControlPlane } from './server.js';

/**
 * The control plane process: configuration from the environment, then serve until a signal.
 * A supervisor (systemd, or `npm start` through the IPC channel it opens) learns the URL once
 * it listens, and restarts the process when it exits.
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(withDeploymentFile(process.env));
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`gpufarm control plane: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
  const controlPlane = await startControlPlane(config);
  const log = controlPlane.app.log;
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

main().catch((err: unknown) => {
  console.error(`gpufarm control plane failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
