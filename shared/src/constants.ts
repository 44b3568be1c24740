/** Values the spec fixes for every response and request. */
export const SERVICE_VERSION = '2026-10-01';
export const DEFAULT_CHAIN_ID = 4663;
/** Request bodies over this many bytes get 413 `payload_too_large`. */
export const MAX_BODY_BYTES = 256 * 1024;
/** The spec's floor for any machine's minimum billing. */
export const MIN_BILLING_SECONDS = 60;
export const API_KEY_SCOPES = ['jobs:create', 'jobs:read', 'artifacts:read', 'billing:read'] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];
export const ENVIRONMENTS = ['mainnet', 'testnet', 'local'] as const;
export type Environment = (typeof ENVIRONMENTS)[number];
export const BENCHMARK_TIERS = ['S', 'A', 'B', 'C'] as const;
export type BenchmarkTier = (typeof BENCHMARK_TIERS)[number];
export const WORKLOAD_TYPES = ['inference', 'image_generation', 'video', 'rendering', 'batch', 'fine_tuning', 'development', 'custom'] as const;
export type WorkloadType = (typeof WORKLOAD_TYPES)[number];
