import t from 'tap';
import { listEgress } from '../src/egress/network.js';
import { docker, localImages } from './helpers/docker.js';
import { checkNumbering, e2eAgent, finished, of, spec, until } from './helpers/e2e.js';

/**
 * The real `gf-agent run` with `egress_proxy_image` set runs an allowlist job behind its proxy
 * (production mode: no test hosts, so nothing is reachable on this machine and nothing leaves
 * it): the job's proxy refuses what is not on the list, the decisions reach the control plane as
 * the job's system lines, and proxy and network are gone once the job is done.
 */

t.test('behavior: gf-agent run with egress_proxy_image runs an allowlist job behind its proxy', async (t) => {
  const agent = await e2eAgent(t, { GF_AGENT_EGRESS_PROXY_IMAGE: localImages().egressProxy.reference });
  const { peer } = agent;
  t.teardown(async () => {
    for (const n of await docker.listNetworks({ filters: { label: [`org.gpufarm.owner=${agent.machineId}`] } })) await docker.getNetwork(n.Id).remove().catch(() => undefined);
  });
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const connect = (target: string) => `printf 'CONNECT ${target} HTTP/1.1\\r\\n\\r\\n' | timeout 8 nc gf-egress 3128 | head -n 1`;
  const job = spec({
    command: ['sh', '-c', `echo "proxy=$HTTPS_PROXY"; ${connect('other.example.com:443')}; ${connect('10.0.0.1:443')}`],
    networkPolicy: { mode: 'allowlist', allow: ['api.example.com'] },
  });
  peer.assign(job);
  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', final.failure?.message ?? '');
  t.equal(final.exitCode, 0);

  const lines = checkNumbering(t, agent, job.assignmentId);
  t.same(of(lines, 'stdout').map((l) => l.trim()), ['proxy=http://gf-egress:3128', 'HTTP/1.1 403 Forbidden', 'HTTP/1.1 403 Forbidden']);
  const system = of(lines, 'system').join('\n');
  t.match(system, /egress proxy [0-9a-f]{12} on network gf-egress-\S+ allows api\.example\.com\n/, 'not in test mode');
  t.match(system, /egress refused other\.example\.com:443 \(not_allowed\)/);
  t.match(system, /egress refused 10\.0\.0\.1:443 \(ip_literal\)/);
  await until(async () => {
    const left = await listEgress(docker, agent.machineId);
    return left.proxies.length + left.networks.length === 0;
  }, 'proxy and network removed');
});

t.test('behavior: without egress_proxy_image an allowlist assignment is rejected as unsupported', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');
  const job = spec({ networkPolicy: { mode: 'allowlist', allow: ['api.example.com'] } });
  peer.assign(job);
  await peer.waitFor(() => peer.messages('assignment.rejected').length === 1, 'rejected');
  t.match(peer.messages('assignment.rejected'), [{ assignmentId: job.assignmentId, reason: 'unsupported' }]);
});
