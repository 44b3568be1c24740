import { type ApiKeyScope } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { type KeyEnvironment } from './api-keys.js';
export interface ApiKeyRecord {
    keyId: string;
    accountId: string;
    walletAddress: string;
    accountStatus: 'active' | 'suspended';
    scopes: ApiKeyScope[];
    revokedAt: Date | null;
}
export declare function findApiKeyByHash(db: Queryable, keyHash: string): Promise<ApiKeyRecord | null>;
export interface CreatedApiKey {
    /** The full key: shown once, never stored. */
    key: string;
    keyId: string;
    accountId: string;
    walletAddress: string;
    scopes: ApiKeyScope[];
    accountCreated: boolean;
}
/**
 * Creates a key for the account whose primary wallet is `walletAddress`, creating the account
 * first when there is none. Only the key's SHA-256 is stored.
 */
export declare function createApiKey(db: Queryable, params: {
    walletAddress: string;
    scopes: ApiKeyScope[];
    environment: KeyEnvironment;
    label?: string | null;
}): Promise<CreatedApiKey>;
/** Revokes a key; returns false when there is no such key. Revoking twice keeps the first time. */
export declare function revokeApiKey(db: Queryable, keyId: string): Promise<boolean>;
export declare function setAccountStatus(db: Queryable, accountId: string, status: 'active' | 'suspended'): Promise<boolean>;
