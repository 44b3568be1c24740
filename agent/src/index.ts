/** The farm agent (gf-agent): the pieces the daemon and its tests wire together. */
export * from './benchmark/index.js';
export * from './challenge/index.js';
export * from './config/index.js';
export * from './daemon/index.js';
export * from './doctor/index.js';
export * from './inventory/index.js';
export * from './link/index.js';
export * from './logs/index.js';
export { agentLogger, silentLog, type AgentLog, type LogFields } from './logger/logger.js';
export { systemdUnit, type UnitOptions } from './service/systemd.js';
