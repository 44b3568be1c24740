import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import t from 'tap';
import type { AssignmentSpec } from '@gpufarm/shared';
import { egressName, listEgress } from '../src/egress/network.js';
import { execInContainer } from '../src/docker/exec.js';
import { LABEL_OWNER } from '../src/docker/labels.js';
import { busyboxSpec, collectLines, docker, localImages, testRuntime, uniqueName } from './helpers/docker.js';

/**
 * An allowlist job and IPv6 on the real Docker Engine. dockerd here runs without IPv6, so the
 * test makes its own IPv6 network ("another bridge": a ULA-free, public-looking /64 and a
 * public-looking IPv4 /24, both only on this host) with a listener container on it; the host gets
 * an address on that bridge in each family, and the test's own server listens on every host
 * address (`::`, dual-stack). From the job's container nothing of it may be reached: not directly
 * (the job has no IPv6 at all, and no IPv4 route off its internal network), not through its proxy
 * by IPv6 literal, nor by a name that resolves (through the proxy's own resolver, its
 * `/etc/hosts`) to the host's own addresses, its networks, link-local, ULA, documentation,
 * NAT64 or IPv4-mapped private addresses. Controls from a container on the IPv6 bridge show the
 * targets do answer over IPv6.
 */

const TEST_LABEL = 'org.gpufarm.test';


const connectVia = (target: string) => `printf 'CONNECT ${target} HTTP/1.1\\r\\n\\r\\n' | timeout 8 nc gf-egress 3128`;
const direct = (host: string, port: number) => `if timeout 5 nc -w 3 ${host} ${port} </dev/null >/dev/null 2>&1; then echo CONNECTED; else echo FAILED; fi`;

t.test('behavior: an allowlist job reaches no host or LAN service over IPv6, directly or through its proxy', async (t) => {
  const owner = uniqueName('t');
  const tag = uniqueName('egress-v6');
  const clean = async () => {
    for (const label of [`${LABEL_OWNER}=${owner}`, `${TEST_LABEL}=${tag}`]) {
      for (const c of await docker.listContainers({ all: true, filters: { label: [label] } })) await docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined);
    }
    for (const label of [`${LABEL_OWNER}=${owner}`, `${TEST_LABEL}=${tag}`]) {
      for (const n of await docker.listNetworks({ filters: { label: [label] } })) await docker.getNetwork(n.Id).remove().catch(() => undefined);
    }
  };
  t.teardown(clean);

  // The host's own service, on every address of both families.
  const hostServer = createServer((s) => s.end('host-answer\n'));
  hostServer.listen(0, '::');
  await once(hostServer, 'listening');
  t.teardown(() => new Promise<void>((r) => hostServer.close(() => r())));
  const hostPort = (hostServer.address() as AddressInfo).port;

  // Another bridge, with IPv6 (dockerd's is off: the test's own network turns it on). The
  // prefixes are public by range, as a farm's LAN or a data centre's may be, so only "this
  // machine's own network" can refuse them.
  const n = 1 + Math.floor(Math.random() * 250);
  const v6Prefix = `2001:db9:${n.toString(16)}:6a7e`;
  const v4Prefix = `11.213.${n}`;
  const bridgeName = uniqueName(`gf-v6-${tag}`).slice(0, 60);
  const bridge = await docker.createNetwork({
    Name: bridgeName,
    Driver: 'bridge',
    EnableIPv6: true,
    IPAM: { Config: [{ Subnet: `${v4Prefix}.0/24`, Gateway: `${v4Prefix}.1` }, { Subnet: `${v6Prefix}::/64`, Gateway: `${v6Prefix}::1` }] },
    Labels: { [TEST_LABEL]: tag },
  });
  const listener = await docker.createContainer({
    name: uniqueName(`gf-v6-listener-${tag}`),
    Image: localImages().busybox.reference,
    Cmd: ['nc', '-ll', '-p', '80', '-e', 'echo', 'other-bridge'],
    Labels: { [TEST_LABEL]: tag },
    HostConfig: { NetworkMode: bridgeName },
  });
  await listener.start();
  const listenerInfo = await listener.inspect();
  const listenerV6 = listenerInfo.NetworkSettings.Networks[bridgeName]?.GlobalIPv6Address ?? '';
  t.match(listenerV6, new RegExp(`^${v6Prefix}::`), 'the listener has an IPv6 address on the other bridge');
  const hostV6 = `${v6Prefix}::1`;
  const hostV4 = `${v4Prefix}.1`;
  // The host's other IPv6 addresses (this machine: a ULA on eth0), if any.
  const hostOwnV6 = Object.values(networkInterfaces()).flat().filter((a) => a && a.family === 'IPv6' && !a.internal && !a.address.startsWith('fe80') && !a.address.startsWith(v6Prefix)).map((a) => a!.address);

  // Controls: over IPv6, the host's service and the listener do answer a container on that bridge.
  const probe = await docker.createContainer({
    name: uniqueName(`gf-v6-probe-${tag}`),
    Image: localImages().busybox.reference,
    Cmd: ['sleep', '300'],
    Labels: { [TEST_LABEL]: tag },
    HostConfig: { NetworkMode: bridgeName },
  });
  await probe.start();
  await t.test('controls: the targets answer over IPv6 from their own bridge', async (t) => {
    t.equal((await execInContainer(docker, probe.id, direct(hostV6, hostPort))).trim(), 'CONNECTED', `the host at ${hostV6}`);
    t.equal((await execInContainer(docker, probe.id, direct(listenerV6, 80))).trim(), 'CONNECTED', `the listener at ${listenerV6}`);
  });

  const resolved: Record<string, string> = {
    'host-v4.example.com': hostV4,
    'host-v6.example.com': hostV6,
    'lan-v6.example.com': listenerV6,
    'doc-v6.example.com': '3fff::1',
    'mapped.example.com': '::ffff:10.0.0.1',
    'linklocal.example.com': 'fe80::1',
    'ula.example.com': 'fd00::2',
    'nat64.example.com': '64:ff9b::a00:1',
  };
  const runtime = testRuntime(t, {
    owner,
    machine: {
      simulated: true,
      cpuCores: 2,
      ramBytes: 4 * 1024 ** 3,
      egress: { image: localImages().egressProxy.reference, ports: [80, 443, hostPort], testResolvedHosts: resolved },
    },
  });
  const spec: AssignmentSpec = busyboxSpec({ command: ['sh', '-c', 'sleep 300'], networkPolicy: { mode: 'allowlist', allow: Object.keys(resolved) }, maxRuntimeSeconds: 120 });
  const job = await runtime.start(spec, collectLines().sink);
  t.teardown(() => job.cancel().catch(() => undefined));
  const network = egressName(owner, job.assignmentId);

  await t.test('the job network has no IPv6, and neither has the job', async (t) => {
    const info = (await docker.getNetwork(network).inspect()) as { EnableIPv6: boolean; IPAM: { Config: Array<{ Subnet?: string }> } };
    t.equal(info.EnableIPv6, false, 'no IPv6 on the job network');
    t.notOk(info.IPAM.Config.some((c) => c.Subnet?.includes(':')), 'no IPv6 subnet');
    const inside = await execInContainer(docker, job.containerId, 'cat /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6; wc -l < /proc/net/if_inet6');
    t.same(inside.trim().split(/\s+/), ['1', '1', '0'], 'IPv6 off in the job: no address, not even link-local');
    const created = await docker.getContainer(job.containerId).inspect();
    t.match((created.HostConfig as { Sysctls?: Record<string, string> }).Sysctls, { 'net.ipv6.conf.all.disable_ipv6': '1', 'net.ipv6.conf.default.disable_ipv6': '1' }, 'the agent turns IPv6 off itself, whatever the engine does');
  });

  await t.test('direct connections from the job fail', async (t) => {
    const targets: Array<[string, string, number]> = [
      [`the host on the other bridge, ${hostV6}`, hostV6, hostPort],
      [`the listener on the other bridge, ${listenerV6}`, listenerV6, 80],
      [`the host over IPv4-mapped ::ffff:${hostV4}`, `::ffff:${hostV4}`, hostPort],
      [`the host on the other bridge over IPv4, ${hostV4}`, hostV4, hostPort],
      ...hostOwnV6.map((ip): [string, string, number] => [`the host at ${ip}`, ip, hostPort]),
    ];
    const results = await Promise.all(targets.map(([, ip, port]) => execInContainer(docker, job.containerId, direct(ip, port))));
    targets.forEach(([what], i) => t.equal(results[i]!.trim(), 'FAILED', what));
  });

  await t.test('the proxy refuses IPv6 literals', async (t) => {
    for (const literal of [`[${hostV6}]:${hostPort}`, `[${listenerV6}]:80`, '[fe80::1]:80', '[::ffff:10.0.0.1]:80', '[fd00::2]:80', '[::1]:80', `[::ffff:${hostV4}]:${hostPort}`]) {
      const out = await execInContainer(docker, job.containerId, connectVia(literal));
      t.match(out, /^HTTP\/1\.1 403 Forbidden[\s\S]*ip_literal/, literal);
      t.notMatch(out, /host-answer|other-bridge/, `${literal}: nothing came back`);
    }
  });

  await t.test('the proxy refuses names that resolve to the host, its networks or private IPv6 ranges', async (t) => {
    const expected: Record<string, RegExp> = {
      'host-v4.example.com': /this machine's own network/,
      'host-v6.example.com': /this machine's own network/,
      'lan-v6.example.com': /this machine's own network/,
      'doc-v6.example.com': /documentation 3fff::\/20/,
      'mapped.example.com': /IPv4-mapped 10\.0\.0\.1/,
      'linklocal.example.com': /link-local fe80::\/10/,
      'ula.example.com': /unique local/,
      'nat64.example.com': /NAT64 10\.0\.0\.1/,
    };
    for (const [name, why] of Object.entries(expected)) {
      const port = name.startsWith('host') ? hostPort : 80;
      const out = await execInContainer(docker, job.containerId, connectVia(`${name}:${port}`));
      t.match(out, /^HTTP\/1\.1 403 Forbidden[\s\S]*private_answer/, `${name} -> ${resolved[name]} refused`);
      t.match(out, why, `${name}: says why`);
      t.notMatch(out, /host-answer|other-bridge/, `${name}: nothing came back`);
    }
  });

  await job.cancel();
  await job.done;
  t.same(await listEgress(docker, owner), { proxies: [], networks: [] }, 'proxy and network removed');
  await probe.remove({ force: true });
  await listener.remove({ force: true });
  await bridge.remove();
});
