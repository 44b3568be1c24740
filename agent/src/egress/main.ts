import { promises as dns } from 'node:dns';
import { networkInterfaces } from 'node:os';
import { inCidr } from '@gpufarm/shared/node';
import { EGRESS_CONFIG_ENV, EGRESS_TEST_MODE_ENV, egressProxyConfigSchema } from './config.js';
import { createEgressProxy } from './server.js';

/**
 * The egress proxy's entry point inside its container (bundled into one file by
 * scripts/build-images.sh, run by the host's `node`): reads `GF_EGRESS_CONFIG`, listens on the
 * job network's address only, prints each decision as one JSON line on stdout (the agent turns
 * them into the job's `system` lines) and exits on SIGTERM.
 */
function main(): void {
  const raw = process.env[EGRESS_CONFIG_ENV];
  if (!raw) throw new Error(`${EGRESS_CONFIG_ENV} is not set`);
  const config = egressProxyConfigSchema.parse(JSON.parse(raw));
  const testMode = process.env[EGRESS_TEST_MODE_ENV] === '1';
  const fixedHosts = testMode && config.testHosts ? new Map(Object.entries(config.testHosts)) : undefined;
  const proxy = createEgressProxy(
    { policy: { allow: config.allow, ports: config.ports }, ownNetworks: config.ownNetworks, maxConnections: config.maxConnections, maxBytes: config.maxBytes },
    {
      lookup: async (name) => (await dns.lookup(name, { all: true, verbatim: true })).map((a) => a.address),
      emit: (event) => process.stdout.write(`${JSON.stringify(event)}\n`),
      ...(fixedHosts ? { fixedHosts } : {}),
    },
  );
  const host = config.listenCidr ? listenAddress(config.listenCidr) : '0.0.0.0';
  proxy.server.listen(config.listenPort, host, () => {
    process.stdout.write(`${JSON.stringify({ egress: 'note', message: `proxy listening on ${host}:${config.listenPort} for ${config.allow.join(', ')}${fixedHosts ? ' (test mode)' : ''}` })}\n`);
  });
  const stop = () => void proxy.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

/** This container's IPv4 address in `cidr`; waits for no one: Docker attaches networks before start. */
function listenAddress(cidr: string): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && inCidr(a.address, cidr)) return a.address;
  }
  throw new Error(`no address of this container lies in ${cidr}`);
}

main();
