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
 * - `testHosts`: test mode only (name → address, see `EgressProxyDeps.fixedHosts`).
 */
export const egressProxyConfigSchema = z.strictObject({
  allow: z.array(z.string().min(1).max(253)).min(1).max(64),
  ports: z.array(z.int().min(1).max(65535)).min(1).max(16).default([...DEFAULT_EGRESS_PORTS]),
  maxConnections: z.int().min(1).optional(),
  maxBytes: z.int().min(1).optional(),
  listenPort: z.int().min(1).max(65535).default(EGRESS_PROXY_PORT),
  listenCidr: z.string().optional(),
  testHosts: z.record(z.string(), z.string()).optional(),
});

export type EgressProxyConfig = z.input<typeof egressProxyConfigSchema>;

/** Whether the IPv4 `address` lies in `cidr` (`172.18.0.0/16`). IPv6 CIDRs never match. */
export function inCidr(address: string, cidr: string): boolean {
  const [base, bitsText] = cidr.split('/');
  const bits = Number(bitsText);
  const toInt = (ip: string) => {
    const parts = ip.split('.').map(Number);
    return parts.length === 4 && parts.every((p) => Number.isInteger(p) && p >= 0 && p <= 255) ? parts.reduce((n, p) => n * 256 + p, 0) : null;
  };
  const a = toInt(address);
  const b = base === undefined ? null : toInt(base);
  if (a === null || b === null || !Number.isInteger(bits) || bits < 0 || bits > 32) return false;
  const size = 2 ** (32 - bits);
  return Math.floor(a / size) === Math.floor(b / size);
}
