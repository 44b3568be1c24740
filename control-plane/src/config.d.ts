import { z } from 'zod';
import { ENVIRONMENTS } from '@gpufarm/shared';
/** Every environment variable the control plane reads, with its default. README's table mirrors this. */
declare const envSchema: z.ZodObject<{
    PORT: z.ZodDefault<z.ZodCoercedNumber<unknown>>;
    HOST: z.ZodDefault<z.ZodString>;
    DATABASE_URL: z.ZodOptional<z.ZodString>;
    GF_DATA_DIR: z.ZodDefault<z.ZodString>;
    GF_ENVIRONMENT: z.ZodDefault<z.ZodEnum<{
        mainnet: "mainnet";
        testnet: "testnet";
        local: "local";
    }>>;
    GF_CHAIN_ID: z.ZodDefault<z.ZodCoercedNumber<unknown>>;
    GF_PUBLIC_URL: z.ZodOptional<z.ZodURL>;
    GF_PLATFORM_FEE_BPS: z.ZodDefault<z.ZodCoercedNumber<unknown>>;
    GF_RATE_LIMIT_STORE: z.ZodDefault<z.ZodEnum<{
        postgres: "postgres";
        memory: "memory";
    }>>;
    GF_TRUST_PROXY: z.ZodDefault<z.ZodPipe<z.ZodEnum<{
        0: "0";
        1: "1";
        true: "true";
        false: "false";
    }>, z.ZodTransform<boolean, "0" | "1" | "true" | "false">>>;
    GF_ADMIN_TOKEN: z.ZodOptional<z.ZodString>;
    GF_STABLE_TOKEN_ADDRESS: z.ZodOptional<z.ZodString>;
    GF_STABLE_TOKEN_SYMBOL: z.ZodDefault<z.ZodString>;
    GF_STABLE_TOKEN_DECIMALS: z.ZodDefault<z.ZodCoercedNumber<unknown>>;
    GF_OFFER_INDEX_REFRESH_MS: z.ZodDefault<z.ZodCoercedNumber<unknown>>;
    GF_LOG_LEVEL: z.ZodDefault<z.ZodEnum<{
        error: "error";
        fatal: "fatal";
        warn: "warn";
        info: "info";
        debug: "debug";
        trace: "trace";
        silent: "silent";
    }>>;
}, z.core.$strip>;
export type Env = z.infer<typeof envSchema>;
export interface Config {
    port: number;
    host: string;
    databaseUrl: string | undefined;
    dataDir: string;
    environment: (typeof ENVIRONMENTS)[number];
    chainId: number;
    publicUrl: string;
    platformFeeBps: number;
    rateLimitStore: 'memory' | 'postgres';
    trustProxy: boolean;
    adminToken: string | undefined;
    stableToken: {
        address: string;
        symbol: string;
        decimals: number;
    } | null;
    offerIndexRefreshMs: number;
    logLevel: Env['GF_LOG_LEVEL'];
}
export declare class ConfigError extends Error {
    readonly problems: string[];
    constructor(problems: string[]);
}
/** Reads and validates the configuration; a bad value throws a ConfigError naming the variable. */
export declare function loadConfig(env?: Record<string, string | undefined>): Config;
export {};
