import { z } from 'zod';
import { DEFAULT_EGRESS_PORTS } from './decision.js';

/** The proxy's port inside its container. */
export const EGRESS_PROXY_PORT = 3128;
/** The env variable that carries the proxy's `EgressProxyConfig` (JSON). */
export const EGRESS_CONFIG_ENV = 'GF_EGRESS_CONFIG';
/** Set to `1` to honour `testHosts`; the agent sets it only when its deps carry test hosts. */
export const EGRESS_TEST_MODE_ENV = 'GF_EGRESS_TEST_MODE';

/**
 * What the agent tells one job's proxy, in `GF_EGRESS_CONFIG`.
 * - `allow`: the job's allowlist; `ports`: allowed destination ports;
 * - `maxConnections` / `maxBytes`: the job's tunnels at once and bytes in its life;
 * - `listenCidr`: the job network's subnet: the proxy listens only on its address there, not on
 *   the bridge it reaches the internet through;
 * - `ownNetworks`: the host's own networks that are public by range (its addresses with their
 *   prefixes): names resolving into them are refused, as private addresses are;
 * - `testHosts`: test mode only (name → address, see `EgressProxyDeps.fixedHosts`).
 */
export const egressProxyConfigSchema = z.strictObject({
  allow: z.array(z.string().min(1).max(253)).min(1).max(64),
  ports: z.array(z.int().min(1).max(65535)).min(1).max(16).default([...DEFAULT_EGRESS_PORTS]),
  maxConnections: z.int().min(1).optional(),
  maxBytes: z.int().min(1).optional(),
  listenPort: z.int().min(1).max(65535).default(EGRESS_PROXY_PORT),
  listenCidr: z.string().optional(),
  ownNetworks: z.array(z.string().min(1).max(64)).max(256).default([]),
  testHosts: z.record(z.string(), z.string()).optional(),
});

export type EgressProxyConfig = z.input<typeof egressProxyConfigSchema>;
