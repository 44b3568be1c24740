import type { Environment } from '@gpufarm/shared';
export type KeyEnvironment = 'live' | 'test';
/** mainnet takes live keys only; testnet and local take test keys only. */
export declare function keyEnvironmentFor(environment: Environment): KeyEnvironment;
export declare function generateApiKey(environment: KeyEnvironment): string;
export declare function hashApiKey(key: string): string;
/** The key's environment when it is well formed, otherwise null. */
export declare function parseApiKey(key: string): {
    environment: KeyEnvironment;
} | null;
