export * from './gpu-probe.js';
export * from './gpu-reader.js';
export * from './host.js';
export * from './monitor.js';
export * from './nvidia-smi-xml.js';
export * from './simulated.js';
export * from './snapshot.js';
export * from './docker-output.js';
