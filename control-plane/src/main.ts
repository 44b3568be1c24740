#!/usr/bin/env -S npx tsx
import { withDeploymentFile } from './chain/deployment-file.js';
import { ConfigError, loadConfig } from './config.js';
import { closeOnSignals, startControlPlane } from './server.js';

/** The control plane process: configuration from the environment, then serve until a signal. */
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
  closeOnSignals(await startControlPlane(config));
}

main().catch((err: unknown) => {
  console.error(`gpufarm control plane failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
