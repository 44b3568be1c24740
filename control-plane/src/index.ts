export { buildApp, type AppDeps } from './app.js';
export { loadConfig, ConfigError, type Config } from './config.js';
export { startControlPlane, type ControlPlane } from './server.js';
