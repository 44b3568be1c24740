import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { billingListSchema, capacityListSchema, jobListSchema, jobSchema, logListSchema, pricingSchema } from '@gpufarm/shared';
import t from 'tap';
import { createTestKey } from '@gpufarm/control-plane/testing/app';
import { artifactSetup } from '@gpufarm/control-plane/testing/uploads';
import { createFsBlobStore } from '@gpufarm/control-plane/artifacts';
import { createFarm, createMachine } from '@gpufarm/control-plane/testing';
import { insertAgentLines } from '@gpufarm/control-plane/logs';
import { VERSION } from '../src/cli/version.js';
import { createClient } from '../src/index.js';
import { listening } from './helpers/control-plane.js';
import { gf, gfHome, gfOnTerminal, gfShellLine } from './helpers/gf.js';

const run = promisify(execFile);
// Every case spawns gf as a fresh process: minutes when other test files share the cores.
// Ten minutes: on the client's oldest Node this file runs beside the Node 24 pass (160 s there in
// a CI run on two cores, 50 s alone).
t.setTimeout(600_000);
const SPEC = { image: 'ghcr.io/acme/job:1', gpu: { count: 1 }, maxPricePerGpuHour: '2' };

/** A listening control plane with artifacts, one key and one machine on offer. */
async function market(t: { teardown(fn: () => unknown): void }) {
  const s = await listening((env) => artifactSetup(t, env));
  const farm = await createFarm(s.db, { slug: 'cli-farm' });
  await createMachine(s.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 450_000 });
  await s.offerIndex.refresh();
  return s;
}

t.test('default: --version is the package version, --help lists the commands and the exit codes', async (t) => {
  const pkg = JSON.parse(readFileSync(join(import.meta.dirname, '../package.json'), 'utf8')) as { version: string };
  t.equal(VERSION, pkg.version, 'the version constant follows client/package.json');
  const version = await gf(['--version']);
  t.equal(version.code, 0);
  t.equal(version.stdout.trim(), pkg.version);
  const help = await gf(['--help']);
  t.equal(help.code, 0);
  for (const word of ['login', 'whoami', 'capacity', 'pricing', 'run', 'jobs', 'logs', 'artifacts', 'billing', 'completion', 'Exit codes']) t.match(help.stdout, word);
  const jobsHelp = await gf(['jobs', '--help']);
  t.match(jobsHelp.stdout, /list.*\n.*get/s);
});

t.test('error: a wrong command line exits 2 and says why on stderr', async (t) => {
  const home = gfHome(t);
  const cases: [string[], RegExp][] = [
    [['capacity', '--bogus'], /unknown option '--bogus'/],
    [['capacity', '--sort', 'cheapest'], /Allowed choices are available, price_asc/],
    [['capacity', '--limit', '0'], /--limit: Too small/],
    [['capacity', '--max-price', '0.1234567'], /--max-price: must have at most 6 decimal places/],
    [['jobs', 'list', '--status', 'SLEEPING'], /--status/],
    [['run', '-f', '/nonexistent/job.yaml'], /Cannot read the job file \/nonexistent\/job.yaml: ENOENT/],
    [['logs'], /missing required argument 'job'/],
    [['run', '-f', 'job.yaml', '--follow'], /--follow needs --fund/],
    [['nosuch'], /unknown command 'nosuch'/],
    [['--endpoint', 'not a url', 'pricing'], /--endpoint: Invalid URL/],
  ];
  for (const [args, message] of cases) {
    const r = await gf(args, { env: home.env });
    t.equal(r.code, 2, `gf ${args.join(' ')} exits 2`);
    t.match(r.stderr, message, `gf ${args.join(' ')} says why`);
    t.equal(r.stdout, '', 'nothing on stdout');
  }
  const dir = mkdtempSync(join(tmpdir(), 'gf-cli-spec-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'bad.yaml'), 'image: ghcr.io/acme/job:1\ngpu:\n  count: 99\n');
  const bad = await gf(['run', '-f', join(dir, 'bad.yaml')], { env: { ...home.env, GF_ENDPOINT: 'http://127.0.0.1:9' } });
  t.equal(bad.code, 2, 'a job file failing the schema exits 2 before any call');
  t.match(bad.stderr, /gpu\.count/);
  writeFileSync(join(dir, 'broken.json'), '{ "image": ');
  const broken = await gf(['run', '-f', join(dir, 'broken.json')], { env: home.env });
  t.equal(broken.code, 2);
  t.match(broken.stderr, /is not valid JSON/);
  // The dashboard's "Copy as gf run" pipes the spec in: -f - reads it from standard input.
  const piped = await gf(['run', '-f', '-'], { env: { ...home.env, GF_ENDPOINT: 'http://127.0.0.1:9' }, input: JSON.stringify({ image: 'ghcr.io/acme/job:1', gpu: { count: 99 } }) });
  t.equal(piped.code, 2, 'a spec on standard input is read and checked before any call');
  t.match(piped.stderr, /gpu\.count/);
});

t.test('behavior: login verifies the key, stores it 0600 in the XDG config with profiles; precedence flag > env > profile', async (t) => {
  const s = await market(t);
  const other = await createTestKey(s.db);
  const home = gfHome(t);

  const refused = await gf(['login', '--endpoint', s.baseUrl], { env: home.env, input: 'gf_test_notakeyatall\n' });
  t.equal(refused.code, 3, 'a key the API refuses exits 3');
  t.match(refused.stderr, /invalid_api_key \(HTTP 401\)/);
  t.match(refused.stderr, /request id: req_/);
  t.match(refused.stderr, /next: /);
  t.notOk(existsSync(join(home.configDir, 'config.toml')), 'a refused key is not saved');

  const login = await gf(['login', '--endpoint', s.baseUrl], { env: home.env, input: `${s.key}\n` });
  t.equal(login.code, 0, login.stderr);
  t.match(login.stdout, `Saved as profile "default"`);
  t.notMatch(login.stdout + login.stderr, s.key, 'the key is never printed whole');
  const file = join(home.configDir, 'config.toml');
  t.equal(statSync(file).mode & 0o777, 0o600, 'config.toml is 0600');
  t.equal(statSync(home.configDir).mode & 0o777, 0o700, 'its directory is 0700');
  t.match(readFileSync(file, 'utf8'), `api_key = "${s.key}"`);
  t.same(readdirSync(home.configDir), ['config.toml'], 'no temporary file left');

  const second = await gf(['login', '--profile', 'other', '--endpoint', s.baseUrl, '--api-key', other.key], { env: home.env });
  t.equal(second.code, 0, second.stderr);
  t.match(readFileSync(file, 'utf8'), /\[profiles\.default\][\s\S]*\[profiles\.other\]/, 'both profiles kept');
  t.equal(statSync(file).mode & 0o777, 0o600);

  const whoami = async (args: string[], env: Record<string, string> = {}) => {
    const r = await gf(['whoami', '--json', ...args], { env: { ...home.env, ...env } });
    t.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as { profile: string; endpoint: string; endpointSource: string; apiKey: string; apiKeySource: string; keyStatus: string };
  };
  const tail = (key: string) => key.slice(-4);
  let me = await whoami([]);
  t.match(me, { profile: 'default', endpoint: s.baseUrl, endpointSource: 'profile', apiKeySource: 'profile', keyStatus: 'valid' });
  t.ok(me.apiKey.endsWith(tail(s.key)), 'the default profile key');
  me = await whoami([], { GF_PROFILE: 'other' });
  t.ok(me.apiKey.endsWith(tail(other.key)), 'GF_PROFILE picks the profile');
  me = await whoami(['--profile', 'default'], { GF_PROFILE: 'other' });
  t.ok(me.apiKey.endsWith(tail(s.key)), '--profile beats GF_PROFILE');
  me = await whoami([], { GF_API_KEY: other.key });
  t.match(me, { apiKeySource: 'env' });
  t.ok(me.apiKey.endsWith(tail(other.key)), 'GF_API_KEY beats the profile');
  me = await whoami(['--api-key', s.key], { GF_API_KEY: other.key });
  t.match(me, { apiKeySource: 'flag' });
  t.ok(me.apiKey.endsWith(tail(s.key)), '--api-key beats GF_API_KEY');

  const unreachable = 'http://127.0.0.1:9';
  const viaEnv = await gf(['whoami'], { env: { ...home.env, GF_ENDPOINT: unreachable } });
  t.equal(viaEnv.code, 3, 'GF_ENDPOINT beats the profile (and an unreachable endpoint exits 3)');
  t.match(viaEnv.stderr, /network_error/);
  t.match(viaEnv.stderr, /next: Check the endpoint/);
  me = await whoami(['--endpoint', s.baseUrl], { GF_ENDPOINT: unreachable });
  t.match(me, { endpoint: s.baseUrl, endpointSource: 'flag' }, '--endpoint beats GF_ENDPOINT');

  chmodSync(file, 0o644);
  const loose = await gf(['whoami'], { env: home.env });
  t.equal(loose.code, 0, 'a config others can read is still used');
  t.match(loose.stderr, `readable by others (mode 0644); run: chmod 600 ${file}`);
  chmodSync(file, 0o600);

  // On a terminal without --api-key, gf login asks for the key.
  const home3 = gfHome(t);
  const prompted = await gfOnTerminal(['login', '--endpoint', s.baseUrl, '--profile', 'typed'], { env: home3.env, input: `${other.key}\r` });
  t.equal(prompted.code, 0, prompted.stdout);
  t.match(prompted.stdout, `API key for ${s.baseUrl}: `);
  t.match(readFileSync(join(home3.configDir, 'config.toml'), 'utf8'), `[profiles.typed]\nendpoint = "${s.baseUrl}"\napi_key = "${other.key}"`);

  const home2 = gfHome(t);
  const noXdg = { HOME: home2.home };
  const plain = await gf(['login', '--endpoint', s.baseUrl, '--api-key', s.key], { env: noXdg });
  t.equal(plain.code, 0, plain.stderr);
  t.equal(statSync(join(home2.home, '.config/gpufarm/config.toml')).mode & 0o777, 0o600, 'without XDG_CONFIG_HOME: ~/.config/gpufarm/config.toml');
});

t.test('behavior: capacity, pricing, jobs and billing print tables; --json is the API JSON alone; --explain traces each call', async (t) => {
  const s = await market(t);
  const home = gfHome(t);
  const env = { ...home.env, GF_ENDPOINT: s.baseUrl, GF_API_KEY: s.key };
  const sdk = createClient({ baseUrl: s.baseUrl, apiKey: s.key });
  const first = await sdk.jobs.create(SPEC);
  const second = await sdk.jobs.create({ ...SPEC, title: 'second' });

  const table = await gf(['capacity'], { env });
  t.equal(table.code, 0, table.stderr);
  t.match(table.stdout, /GPU\s+VRAM\s+AVAIL\s+PER GPU-H/);
  t.match(table.stdout, /RTX 4090.*24 GB.*2\/2.*\$0\.45/);
  t.match(table.stdout, /1 offer · 2 of 2 GPUs available · \$0\.45 per GPU-hour/);
  const filtered = await gf(['capacity', '--max-price', '0.40'], { env });
  t.match(filtered.stdout, /No offers\./, '--max-price reaches the API');
  t.match(table.stdout, /RTX 4090.*not proven/, 'the PROOF column: the machine has not proven its GPUs');
  t.match((await gf(['capacity', '--proven'], { env })).stdout, /No offers\./, '--proven reaches the API');
  await s.db.query(`UPDATE machines SET proven_at = '2026-03-01T09:30:00Z'`);
  await s.offerIndex.refresh();
  const proven = await gf(['capacity', '--proven'], { env });
  t.equal(proven.code, 0, proven.stderr);
  t.match(proven.stdout, /RTX 4090.*proven 2026-03-01/, 'once proven: listed with the day of its proof');

  const json = await gf(['capacity', '--json', '--sort', 'price_asc'], { env });
  t.equal(json.code, 0);
  t.ok(capacityListSchema.safeParse(JSON.parse(json.stdout)).success, 'capacity --json is the API page, nothing else on stdout');
  t.equal(json.stderr, '');

  const pricing = await gf(['pricing', '--json'], { env });
  t.ok(pricingSchema.safeParse(JSON.parse(pricing.stdout)).success);
  const pricingTable = await gf(['pricing'], { env });
  t.match(pricingTable.stdout, /platform fee \d+\.\d\d%/);

  const page = await gf(['jobs', 'list', '--json', '--limit', '1'], { env });
  const parsed = jobListSchema.parse(JSON.parse(page.stdout));
  t.same(parsed.data.map((j) => j.id), [second.job.id], 'one page of one job');
  t.type(parsed.nextCursor, 'string');
  const all = await gf(['jobs', 'list', '--json', '--limit', '1', '--all'], { env });
  const walked = (JSON.parse(all.stdout) as unknown[]).map((j) => jobSchema.parse(j).id);
  t.same(walked, [second.job.id, first.job.id], '--all --json is one array of every page');
  const listed = await gf(['jobs', 'list', '--limit', '1'], { env });
  t.match(listed.stdout, second.job.id);
  t.match(listed.stdout, /More jobs: add --cursor \S+ \(or --all\)/);

  const got = await gf(['jobs', 'get', first.job.id, '--json'], { env });
  t.equal(jobSchema.parse(JSON.parse(got.stdout)).id, first.job.id);
  const canceled = await gf(['jobs', 'cancel', first.job.id, '--reason', 'cli test'], { env });
  t.equal(canceled.code, 0, canceled.stderr);
  t.match(canceled.stdout, `Job ${first.job.id} is CANCELED.`);
  const waited = await gf(['jobs', 'wait', first.job.id], { env });
  t.equal(waited.code, 1, 'waiting on a CANCELED job exits 1');
  t.match(waited.stdout, /status\s+CANCELED/);
  t.match(waited.stderr, `job ${first.job.id} is CANCELED\n`, 'into a pipe the status is a plain line');
  // On a terminal (script(1) gives it one) the status line has a spinner and is redrawn in place.
  const onTty = await gfOnTerminal(['jobs', 'wait', first.job.id], { env });
  t.equal(onTty.code, 1);
  t.ok(onTty.stdout.includes(`\r\x1b[2K⠋ job ${first.job.id} is CANCELED`), 'a spinner frame and the status, drawn in place');

  const billing = await gf(['billing', '--json'], { env });
  t.ok(billingListSchema.safeParse(JSON.parse(billing.stdout)).success);
  const billingTable = await gf(['billing'], { env });
  t.match(billingTable.stdout, 'No billing entries.');

  const explained = await gf(['jobs', 'get', second.job.id, '--json', '--explain'], { env });
  t.equal(jobSchema.parse(JSON.parse(explained.stdout)).id, second.job.id, 'stdout stays pure JSON with --explain');
  t.match(explained.stderr, new RegExp(`^→ GET ${s.baseUrl}/v1/jobs/${second.job.id}\\?include=startup 200 req_\\S+ \\d+ms$`, 'm'), 'one line per call: method, URL with its query, status, request id');

  const missing = await gf(['jobs', 'get', `job_${'a'.repeat(26)}`, '--explain'], { env });
  t.equal(missing.code, 3, 'an API error exits 3');
  t.match(missing.stderr, /→ GET \S+ 404 req_/);
  t.match(missing.stderr, /gf: not_found \(HTTP 404\): /);
  t.match(missing.stderr, /request id: req_\S+/);
  t.match(missing.stderr, /next: Check the id/);
  t.equal(missing.stdout, '');

  const noKey = await gf(['jobs', 'list'], { env: { ...home.env, GF_ENDPOINT: s.baseUrl } });
  t.equal(noKey.code, 3);
  t.match(noKey.stderr, /missing_api_key[\s\S]*next: Run `gf login`/);
});

t.test('behavior: gf logs prints a job\'s lines without the escape sequences and controls in them, into a pipe and on a terminal; --json keeps them as stored', async (t) => {
  const s = await market(t);
  const home = gfHome(t);
  const env = { ...home.env, GF_ENDPOINT: s.baseUrl, GF_API_KEY: s.key };
  const { job } = await createClient({ baseUrl: s.baseUrl, apiKey: s.key }).jobs.create(SPEC);
  // What a job (or its machine) can write: a window title (OSC), a screen clear (CSI), a hyperlink
  // (OSC 8, ST-terminated), a bell and an 8-bit CSI, and a line break that would fake a line of its own.
  const written = [
    { stream: 'stdout' as const, line: '\x1b]0;pwned\x07title set' },
    { stream: 'stderr' as const, line: '\x1b[2Jscreen cleared' },
    { stream: 'stdout' as const, line: '\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ text' },
    { stream: 'stdout' as const, line: 'bell\x07 and \x9b31m C1 red' },
    { stream: 'stderr' as const, line: 'fake\r\n[system] verified: RESULT_VERIFIED' },
  ];
  await insertAgentLines(s.db, { jobId: job.id, assignmentId: 'asg_cli_logs', lines: written.map((l, seq) => ({ ...l, seq, atMs: Date.now() })), capBytes: 1 << 20 });
  // eslint-disable-next-line no-control-regex -- the test looks for the control characters gf must not print
  const controls = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

  const piped = await gf(['logs', job.id], { env });
  t.equal(piped.code, 0, piped.stderr);
  t.equal(piped.stdout, 'title set\nlink text\nbell and  C1 red\n', 'stdout lines as text');
  t.equal(piped.stderr, 'screen cleared\nfake  [system] verified: RESULT_VERIFIED\n', 'stderr lines as text, each on one line: nothing reads as a system line');
  t.notMatch(piped.stdout + piped.stderr, controls, 'no control character reaches the pipe');

  const onTty = await gfOnTerminal(['logs', job.id], { env });
  t.equal(onTty.code, 0, onTty.stdout);
  for (const text of ['title set', 'screen cleared', 'link text', 'bell and  C1 red']) t.match(onTty.stdout, text);
  t.notMatch(onTty.stdout.replaceAll('\r\n', '\n'), controls, 'nor the terminal (its own line ends aside)');

  const json = await gf(['logs', job.id, '--json'], { env });
  t.equal(json.code, 0, json.stderr);
  t.same(logListSchema.parse(JSON.parse(json.stdout)).data.map((l) => ({ stream: l.stream, line: l.line })), written, '--json: the lines exactly as stored');
});

t.test('behavior: artifacts get writes the verified file; bytes changed on disk exit 4 and leave no file', async (t) => {
  const s = await market(t);
  const home = gfHome(t);
  const env = { ...home.env, GF_ENDPOINT: s.baseUrl, GF_API_KEY: s.key };
  const sdk = createClient({ baseUrl: s.baseUrl, apiKey: s.key });
  const bytes = Buffer.from('artifact bytes for the cli '.repeat(2000));
  const uploaded = await sdk.artifacts.upload(bytes, { filename: 'weights.bin' });
  const out = mkdtempSync(join(tmpdir(), 'gf-cli-out-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));

  const got = await gf(['artifacts', 'get', uploaded.id], { env, cwd: out });
  t.equal(got.code, 0, got.stderr);
  t.match(got.stdout, `${join(out, 'weights.bin')} `);
  t.match(got.stdout, `sha256 ${uploaded.sha256} (verified)`);
  t.same(readFileSync(join(out, 'weights.bin')), bytes);
  const json = await gf(['artifacts', 'get', uploaded.id, '-o', join(out, 'copy.bin'), '--json'], { env });
  t.same(JSON.parse(json.stdout), { artifactId: uploaded.id, path: join(out, 'copy.bin'), sizeBytes: bytes.length, sha256: uploaded.sha256, verified: true });

  // On a terminal (script(1) gives it one) the download draws a bar with bytes, rate and ETA.
  const onTty = await gfOnTerminal(['artifacts', 'get', uploaded.id, '-o', join(out, 'tty.bin')], { env });
  t.equal(onTty.code, 0);
  const ESC = '\x1b';
  t.match(onTty.stdout, new RegExp(`\r${ESC}\\[2Kart_\\S+ \\[█+░*\\] [\\d.]+ KiB/[\\d.]+ KiB [\\d.]+ (B|KiB|MiB)/s`), 'a progress bar is drawn in place');
  t.match(onTty.stdout, `sha256 ${uploaded.sha256} (verified)`);
  t.notOk(got.stderr.includes(ESC) || got.stderr.includes('█'), 'into a pipe: no bar, no control codes');
  rmSync(join(out, 'tty.bin'));

  const changed = Buffer.from(bytes);
  changed[3] = changed[3]! ^ 0xff;
  writeFileSync(createFsBlobStore(s.dir).pathOf(uploaded.sha256), changed);
  const bad = await gf(['artifacts', 'get', uploaded.id, '-o', join(out, 'tampered.bin')], { env });
  t.equal(bad.code, 4, 'an integrity error exits 4');
  t.match(bad.stderr, /gf: integrity_error: /);
  t.match(bad.stderr, /next: Download it again/);
  t.notOk(existsSync(join(out, 'tampered.bin')), 'no file at the destination');
  t.same(readdirSync(out).sort(), ['copy.bin', 'weights.bin'], 'no temporary file left');
});

t.test('behavior: a reader that closes the pipe early ends gf quietly, exit 0', async (t) => {
  // `true` exits before gf has started, so every write of gf meets a closed pipe.
  const piped = await run('bash', ['-c', `${gfShellLine(['completion', 'bash'])} | true; echo "gf exited \${PIPESTATUS[0]}"`]);
  t.equal(piped.stdout.trim(), 'gf exited 0');
  t.equal(piped.stderr, '', 'no EPIPE stack trace');
});

t.test('behavior: gf completion bash is a script bash loads, completing commands, subcommands and option values', async (t) => {
  const script = await gf(['completion', 'bash']);
  t.equal(script.code, 0);
  const dir = mkdtempSync(join(tmpdir(), 'gf-cli-completion-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gf.bash');
  writeFileSync(file, script.stdout);
  const complete = async (...words: string[]) => {
    const setup = `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _gf; printf '%s\\n' "\${COMPREPLY[@]}"`;
    return (await run('bash', ['-c', setup])).stdout.trim().split('\n').filter(Boolean);
  };
  t.equal((await run('bash', ['-c', `source ${file}; complete -p gf`])).stdout.trim(), 'complete -F _gf gf', 'bash registers the completion');
  t.same(await complete('gf', 'jo'), ['jobs']);
  t.same(await complete('gf', 'jobs', ''), ['list', 'get', 'cancel', 'fund', 'wait', '--endpoint', '--api-key', '--profile', '--json', '--explain', '--help']);
  t.same(await complete('gf', '--json', 'jobs', 'list', '--st'), ['--status'], 'global options before the command are skipped');
  t.same(await complete('gf', 'capacity', '--sort', 'price'), ['price_asc', 'price_desc'], 'an option with choices completes its values');
  t.same(await complete('gf', 'logs', 'job_1', '--stream', ''), ['stdout', 'stderr', 'system']);
  t.same(await complete('gf', 'completion', ''), ['bash', 'zsh', '--endpoint', '--api-key', '--profile', '--json', '--explain', '--help']);
  writeFileSync(join(dir, 'job.yaml'), 'image: x\n');
  t.same(await complete('gf', 'run', '-f', join(dir, 'job.y')), [join(dir, 'job.yaml')], 'a path option completes file names');

  const zsh = await gf(['completion', 'zsh']);
  t.equal(zsh.code, 0);
  t.match(zsh.stdout, /^#compdef gf\n/);
  t.match(zsh.stdout, /"jobs"\) compadd -- list get cancel fund wait /);
  t.match(zsh.stdout, /--sort\) compadd -- available price_asc price_desc vram uptime count/);
  const bad = await gf(['completion', 'fish']);
  t.equal(bad.code, 2);
});
