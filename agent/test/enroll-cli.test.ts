import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import t from 'tap';
import { gfAgent } from './helpers/cli.js';
import { TestPeer } from './helpers/peer.js';

const TOKEN = `gfe_${'e'.repeat(43)}`;

t.test('gf-agent enroll', async (t) => {
  const peer = await TestPeer.start({ enrollmentTokens: [TOKEN] });
  t.teardown(() => peer.close());
  const stateDir = join(mkdtempSync(join(tmpdir(), 'gf-agent-enroll-')), 'state');
  t.teardown(() => rmSync(join(stateDir, '..'), { recursive: true, force: true }));
  const env = { GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SIMULATE_GPUS: '1x rtx-4090-24gb' };

  t.test('default: stores the machine token and the private key with mode 0600', async (t) => {
    const res = await gfAgent(['enroll', '--server', peer.url, '--token', TOKEN], env);
    t.equal(res.code, 0, res.stderr);
    t.match(res.stdout, /enrolled as machine m_/);
    t.equal(statSync(stateDir).mode & 0o777, 0o700, 'state dir 0700');
    for (const file of ['machine.json', 'machine-key.pem']) t.equal(statSync(join(stateDir, file)).mode & 0o777, 0o600, `${file} is 0600`);
    const machine = JSON.parse(readFileSync(join(stateDir, 'machine.json'), 'utf8')) as { machineId: string; machineToken: string; publicKeyPem: string; server: string };
    t.match(machine.machineToken, /^gfa_/);
    t.ok(peer.machineTokens.has(machine.machineToken), 'the token the server issued');
    t.equal(peer.enrollments.length, 1);
    const sent = peer.enrollments[0]!;
    t.equal(sent.publicKeyPem, machine.publicKeyPem, 'the public key sent is the stored one');
    t.equal(sent.inventory.gpus[0]?.classId, 'rtx-4090-24gb');
    // The stored private key is the ed25519 key whose public half the server has.
    const key = createPrivateKey(readFileSync(join(stateDir, 'machine-key.pem')));
    t.equal(key.asymmetricKeyType, 'ed25519');
    const message = Buffer.from('execution record');
    t.ok(verify(null, message, createPublicKey(sent.publicKeyPem), sign(null, message, key)), 'a signature by the stored key verifies with the sent public key');
  });

  t.test('error: a second enrollment without --force is refused and changes nothing', async (t) => {
    const before = readFileSync(join(stateDir, 'machine.json'), 'utf8');
    const res = await gfAgent(['enroll', '--server', peer.url, '--token', TOKEN], env);
    t.equal(res.code, 1);
    t.match(res.stderr, /already enrolled as machine .* pass --force/);
    t.equal(readFileSync(join(stateDir, 'machine.json'), 'utf8'), before);
  });

  t.test('error: a used token is refused by the server, with its message', async (t) => {
    const res = await gfAgent(['enroll', '--server', peer.url, '--token', TOKEN, '--force'], env);
    t.equal(res.code, 1);
    t.match(res.stderr, /enrollment refused \(HTTP 401\): The enrollment token is unknown or was used/);
  });

  t.test('error: a malformed token never leaves the machine', async (t) => {
    const res = await gfAgent(['enroll', '--server', peer.url, '--token', 'gfe_short', '--force'], env);
    t.equal(res.code, 1);
    t.match(res.stderr, /--token: must be an enrollment token/);
    t.equal(peer.enrollments.length, 1);
  });

  t.test('default: status shows the enrollment', async (t) => {
    const res = await gfAgent(['status', '--json'], env);
    t.equal(res.code, 0, res.stderr);
    const status = JSON.parse(res.stdout) as { enrolled: boolean; machineId: string; server: string; daemon: unknown };
    t.equal(status.enrolled, true);
    t.match(status.machineId, /^m_/);
    t.equal(status.daemon, null);
  });
});

t.test('gf-agent install-service writes a systemd unit and says how to enable it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'gf-agent-unit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'gf-agent.service');
  const res = await gfAgent(['install-service', '--path', path, '--exec', '/usr/local/bin/gf-agent run'], { GF_AGENT_STATE_DIR: '/var/lib/gf-agent' });
  t.equal(res.code, 0, res.stderr);
  t.match(res.stdout, /systemctl daemon-reload/);
  t.match(res.stdout, /systemctl enable --now gf-agent/);
  const unit = readFileSync(path, 'utf8');
  t.match(unit, /^ExecStart=\/usr\/local\/bin\/gf-agent run$/m);
  t.match(unit, /^Restart=always$/m);
  t.match(unit, /^KillMode=process$/m, 'stopping the agent leaves the job containers running');
  t.match(unit, /^WantedBy=multi-user.target$/m);
  const docs = /^Documentation=(.+)$/m.exec(unit)?.[1];
  t.equal(docs, pathToFileURL(join(dirname(fileURLToPath(import.meta.url)), '../README.md')).href, "Documentation= is the agent package's README");
  t.ok(existsSync(fileURLToPath(docs!)), 'which exists');
  t.match(unit, /^User=root$/m);
  t.notMatch(unit, /SupplementaryGroups|AmbientCapabilities/, 'root needs no group for the Docker socket nor a capability for the kernel log');
  const userUnit = join(dir, 'user.service');
  const asUser = await gfAgent(['install-service', '--path', userUnit, '--user', 'gf-agent', '--docs', 'file:///usr/lib/gf-agent/README.md'], {});
  t.equal(asUser.code, 0, asUser.stderr);
  const userText = readFileSync(userUnit, 'utf8');
  t.match(userText, /^User=gf-agent\nSupplementaryGroups=docker$/m, 'another user gets the docker group for the socket');
  t.match(userText, /^AmbientCapabilities=CAP_SYSLOG$/m, 'and may read the kernel log (XID errors)');
  t.match(userText, /^Documentation=file:\/\/\/usr\/lib\/gf-agent\/README.md$/m, '--docs sets Documentation=');
  const again = await gfAgent(['install-service', '--path', path], {});
  t.equal(again.code, 1);
  t.match(again.stderr, /exists; pass --force/);
});
