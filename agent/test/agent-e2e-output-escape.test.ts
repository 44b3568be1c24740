import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { readMachineFile } from '../src/config/state.js';
import { e2eAgent, finished, of, spec, untar, type E2eAgent } from './helpers/e2e.js';

/**
 * End to end: the real `gf-agent run` (as root, as a farm runs it) with the test peer as the
 * control plane and real containers, running jobs that try to read their host through their
 * output rules: symlinks planted at every depth of a rule's path, pointing at the agent's own
 * state folder (machine token, machine key), a secret file of the host and `/proc/self`, plus a
 * FIFO. No upload may hold a byte from outside the job's output, the agent's state stays as it
 * was, and the job finishes (the rules it broke are not stored, with notes saying why).
 */

t.setTimeout(300_000);

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** A file of the host outside any output, readable by everyone (only the packer's walk keeps it out). */
function hostSecret(t: Test): { dir: string; bytes: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), 'gf-host-secret-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  chmodSync(dir, 0o755);
  const bytes = Buffer.from(`host-secret-${randomBytes(24).toString('hex')}\n`);
  writeFileSync(join(dir, 'secret.txt'), bytes, { mode: 0o644 });
  return { dir, bytes };
}

/** The agent's state files and the secrets in them that no artifact may hold. */
function agentState(agent: E2eAgent): { files: Record<string, string>; secrets: Buffer[] } {
  const names = ['machine.json', 'machine-key.pem'];
  const files = Object.fromEntries(names.map((n) => [n, sha256(readFileSync(join(agent.stateDir, n)))]));
  const key = readFileSync(join(agent.stateDir, 'machine-key.pem'), 'utf8');
  const keyBody = key.split('\n').filter((l) => l && !l.startsWith('-----')).join('');
  return { files, secrets: [Buffer.from(readMachineFile(agent.stateDir)!.machineToken), Buffer.from(keyBody.slice(0, 40))] };
}

function holdsNone(t: Test, agent: E2eAgent, assignmentId: string, secrets: Buffer[]): void {
  const uploads = agent.peer.uploads.filter((u) => u.assignmentId === assignmentId);
  t.ok(uploads.length > 0, 'something was uploaded');
  for (const upload of uploads) {
    t.ok(secrets.every((s) => !upload.body.includes(s)), `${upload.name}: no byte of the machine token, the machine key or the host secret`);
  }
}

t.test("behavior: a job's symlinks at every depth of its rules' paths read nothing of the host; the agent's state is intact; the job finishes with notes", async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  const secret = hostSecret(t);
  const before = agentState(agent);
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const script = [
    'ln -s / /output/x',
    'mkdir -p /output/a',
    `ln -s ${agent.stateDir} /output/a/b`,
    `ln -s ${agent.stateDir}/machine.json /output/final`,
    'ln -s /proc/self /output/self',
    'mkfifo /output/fifo',
    'mknod /output/null c 1 3 || echo mknod refused',
    'echo mine > /output/ok.txt',
  ].join('; ');
  const rules = [
    { path: '/output', maxBytes: 1024 * 1024 },
    { path: `/output/x${agent.stateDir}`, maxBytes: 1024 * 1024 },
    { path: '/output/a/b/machine.json', maxBytes: 1024 * 1024 },
    { path: '/output/final', maxBytes: 1024 * 1024 },
    { path: '/output/self/environ', maxBytes: 1024 * 1024 },
    { path: '/output/fifo', maxBytes: 1024 * 1024 },
    { path: `/output/x${secret.dir}/secret.txt`, maxBytes: 1024 * 1024 },
  ];
  const job = spec({ command: ['sh', '-c', script], outputRules: rules });
  peer.assign(job);
  const final = await finished(agent, job.assignmentId);

  t.equal(final.state, 'finished', `finished, not failed: ${final.failure?.message ?? ''}`);
  holdsNone(t, agent, job.assignmentId, [...before.secrets, secret.bytes]);
  t.same(agentState(agent).files, before.files, "the agent's machine.json and machine-key.pem are as they were");
  t.same(peer.invalid, [], 'every message passed its schema');

  const lines = agent.peer.lines.get(job.assignmentId) ?? [];
  t.ok(of(lines, 'stderr').some((l) => /mknod.*(not permitted|denied)/i.test(l)), 'the container cannot make a device node');
  t.ok(of(lines, 'system').some((l) => /^\/output is a \d+-byte filesystem \(loop-mounted ext4, nosymfollow\)/.test(l)), 'the output is mounted nosymfollow');

  t.same(final.outputs!.map((o) => o.name), ['output-0', 'output-3', 'output-5'], 'stored: the whole output, the last-component symlink, the FIFO rule (empty)');
  const symlinkNote = (i: number, through: string) => ({ path: rules[i]!.path, name: `output-${i}`, kind: 'unpackable', message: `${through} is a symbolic link; the path of an output rule (${rules[i]!.path}) is never resolved through one` });
  const skipped = (i: number, what: string) => ({ path: rules[i]!.path, name: `output-${i}`, kind: 'skipped', message: `left out ${what}: only regular files, folders and symlinks are archived, and nothing else is opened` });
  t.same(final.outputNotes, [
    skipped(0, '/output/fifo (a FIFO)'),
    symlinkNote(1, '/output/x'),
    symlinkNote(2, '/output/a/b'),
    symlinkNote(4, '/output/self'),
    skipped(5, '/output/fifo (a FIFO)'),
    symlinkNote(6, '/output/x'),
  ]);
  const uploads = peer.storedUploads(job.assignmentId);
  t.same([...uploads.keys()].sort(), ['log', 'output-0', 'output-3', 'output-5']);
  const whole = await untar(uploads.get('output-0')!.body, 'ok.txt');
  t.same(whole.names, ['a', 'a/b', 'final', 'ok.txt', 'self', 'x'], 'the whole output: its own files, its symlinks as symlinks');
  t.equal(whole.text, 'mine\n');
});

t.test('behavior: with a control plane on protocol 4 the agent leaves the notes out of its report, and still packs nothing of the host', async (t) => {
  const agent = await e2eAgent(t, {}, { versions: [1, 2, 3, 4] });
  const { peer } = agent;
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');
  const job = spec({
    command: ['sh', '-c', 'ln -s / /output/x; mkfifo /output/fifo; echo mine > /output/ok.txt'],
    outputRules: [
      { path: '/output', maxBytes: 1024 * 1024 },
      { path: '/output/x/etc/hostname', maxBytes: 1024 * 1024 },
    ],
  });
  peer.assign(job);
  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', `finished, not failed: ${final.failure?.message ?? ''}`);
  t.same(peer.invalid, [], 'every message passed the older schema');
  t.equal(final.outputNotes, undefined, 'no notes on protocol 4');
  t.same(final.outputs!.map((o) => o.name), ['output-0'], 'the rule through a symlink is not stored');
  t.same([...peer.storedUploads(job.assignmentId).keys()].sort(), ['log', 'output-0']);
});
