import { API_KEY_SCOPES } from '@gpufarm/shared';
import { z } from 'zod';

/** Where the dashboard's own endpoints and its copy of `/v1` live (same origin, session cookie). */
export const DASHBOARD_API = '/dashboard/api';

const addressSchema = z.string().regex(/^0x[0-9a-f]{40}$/);

/** A farm the signed-in wallet runs: as its payout wallet, or as an operator the farm lists. */
export const operatorFarmSchema = z.object({
  id: z.string().min(1),
  slug: z.string().min(1),
  name: z.string(),
  payoutAddress: addressSchema.nullable(),
  role: z.enum(['payout', 'operator']),
});
export type OperatorFarm = z.infer<typeof operatorFarmSchema>;

/** `GET /dashboard/api/auth/session` and the answer of a sign-in; `roles` says which other areas the wallet may open. */
export const sessionViewSchema = z.object({
  address: addressSchema,
  chainId: z.int().positive(),
  expiresAt: z.string(),
  csrfToken: z.string().min(1),
  roles: z.object({ admin: z.boolean(), operatorFarms: z.array(operatorFarmSchema) }),
});
export type SessionView = z.infer<typeof sessionViewSchema>;

export const nonceSchema = z.object({ nonce: z.string().regex(/^[A-Za-z0-9]{8,}$/), expiresAt: z.string() });

export const apiKeyScopeSchema = z.enum(API_KEY_SCOPES);
export type ApiKeyScope = z.infer<typeof apiKeyScopeSchema>;

export const apiKeyViewSchema = z.object({
  id: z.string().min(1),
  prefix: z.string().min(1),
  label: z.string().nullable(),
  scopes: z.array(z.string()),
  createdAt: z.string(),
  lastUsedAt: z.string().nullable(),
  revokedAt: z.string().nullable(),
});
export type ApiKeyView = z.infer<typeof apiKeyViewSchema>;

/** A page of keys, newest first: the /v1 list envelope. */
export const apiKeyListSchema = z.object({ data: z.array(apiKeyViewSchema), nextCursor: z.string().nullable() });
export const apiKeyCreatedSchema = z.object({ key: z.string().min(1), apiKey: apiKeyViewSchema });
export type ApiKeyCreated = z.infer<typeof apiKeyCreatedSchema>;

/** A fetch for same-origin dashboard calls: adds `X-CSRF-Token` to every request that is not a GET or HEAD. */
export function csrfFetch(getCsrfToken: () => string | null): typeof fetch {
  return (input, init = {}) => {
    const method = (init.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const token = getCsrfToken();
    if (method === 'GET' || method === 'HEAD' || token === null) return fetch(input, init);
    const headers = new Headers(init.headers);
    headers.set('x-csrf-token', token);
    return fetch(input, { ...init, headers });
  };
}
