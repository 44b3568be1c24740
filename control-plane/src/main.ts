#!/usr/bin/env -S npx tsx
import { ConfigError, loadConfig } from './config.js';
import { startControlPlane } from './server.js';

/** The control plane process: configuration from the environment, then serve until a signal. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`gpufarm control plane: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
  const controlPlane = await startControlPlane(config);
  const stop = async () => {
    await controlPlane.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: unknown) => {
  console.error(`gpufarm control plane failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
