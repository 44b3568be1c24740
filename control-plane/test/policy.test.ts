import { type JobCreateRequest, parseJobCreateRequest, policyResultSchema } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import {
  BUILTIN_BANNED_IMAGES,
  CRACKER_PROGRAMS,
  evaluatePolicy,
  lanEgressReason,
  MINER_PROGRAMS,
  MINING_POOL_DOMAINS,
  parseBannedImagePattern,
  POLICY_RULES,
  type PolicyOptions,
  type PolicyRule,
} from '../src/policy/policy.js';

/** A real parsed request: the defaults below plus `body`. Throws when the body does not parse. */
function request(body: Record<string, unknown>): JobCreateRequest {
  const parsed = parseJobCreateRequest({ image: 'python:3.12', gpu: { count: 1 }, ...body });
  if (!parsed.ok) throw new Error(`test body does not parse: ${JSON.stringify(parsed.details)}`);
  return parsed.value;
}

/**
 * A parsed request whose allowlist is then replaced by `allow`: for names the request schema
 * already refuses (IP literals, single labels), which the policy must refuse on its own too.
 */
function withAllow(allow: string[]): JobCreateRequest {
  const parsed = request({ networkPolicy: { mode: 'allowlist', allow: ['api.example.com'] } });
  return { ...parsed, networkPolicy: { mode: 'allowlist', allow } };
}

/** Evaluates and checks the result against the response schema; returns `rule field` strings. */
function hits(t: Test, req: JobCreateRequest, options: PolicyOptions = {}): string[] {
  const result = evaluatePolicy(req, options);
  t.same(policyResultSchema.parse(result), result, 'the result is a valid policy object');
  t.equal(result.verdict, result.findings.length === 0 ? 'allowed' : 'rejected', 'the verdict follows the findings');
  for (const finding of result.findings) {
    t.ok((POLICY_RULES as readonly string[]).includes(finding.rule), `${finding.rule} is a known rule`);
    t.ok(finding.field !== null && finding.message.startsWith(`${finding.field} `), `the message names its field: ${finding.message}`);
  }
  return result.findings.map((f) => `${f.rule} ${f.field}`);
}

/** Runs `cases`: each refused with exactly one finding `rule field`, or accepted when `field` is null. */
function table(t: Test, rule: PolicyRule, cases: readonly (readonly [string, Record<string, unknown>, string | null])[], options: PolicyOptions = {}) {
  for (const [name, body, field] of cases) {
    t.test(name, async (t) => {
      t.same(hits(t, request(body), options), field === null ? [] : [`${rule} ${field}`]);
    });
  }
}

const XMR = '48edfHu7V9Z84YzzMa6fUueoELZ9ZRXq9VetWzYGzKt52XU5xvqgzYnDK9URnRoJMk1j8nLwEVsaSWJ4fhdUyZijBGUicoD';
const ETH = '0x52908400098527886e0f7030069857d2e4169ee7';

t.test('default', async (t) => {
  const result = evaluatePolicy(request({}), {});
  t.same(result, { verdict: 'allowed', findings: [] });
  t.same(evaluatePolicy(request({})), { verdict: 'allowed', findings: [] }, 'options may be omitted');
  t.same(POLICY_RULES, ['banned_image', 'mining_signature', 'cracking_signature', 'privilege_request', 'lan_egress']);
});

t.test('behavior: a realistic training job is allowed', async (t) => {
  const req = request({
    image: 'nvcr.io/nvidia/pytorch:24.05-py3',
    command: ['sh', '-c', 'pip install -r /input/code/requirements.txt && torchrun --nproc-per-node 8 /input/code/train.py --lr 3e-4 -a 3 --format=safetensors --output /output'],
    env: { CUDA_VISIBLE_DEVICES: '0,1', NVIDIA_DRIVER_CAPABILITIES: 'all', HF_HOME: '/tmp/hf', RANDOM_STATE: '42', WANDB_MODE: 'offline' },
    networkPolicy: { mode: 'allowlist', allow: ['huggingface.co', 'cdn-lfs.huggingface.co', 'pypi.org', 'files.pythonhosted.org'] },
  });
  t.same(hits(t, req), []);
});

t.test('behavior: banned_image refuses built-in miners and crackers by repository name', async (t) => {
  table(t, 'banned_image', [
    ['xmrig/xmrig:6.21', { image: 'xmrig/xmrig:6.21' }, 'image'],
    ['docker.io/library/hashcat', { image: 'docker.io/library/hashcat' }, 'image'],
    ['hashcat:latest (official image, short form)', { image: 'hashcat:latest' }, 'image'],
    ['a packaging word: ghcr.io/acme/xmrig-cuda', { image: 'ghcr.io/acme/xmrig-cuda:6.21.0' }, 'image'],
    ['a packaging word in front: acme/docker-xmrig', { image: 'acme/docker-xmrig' }, 'image'],
    ['a multi-word tool: acme/t-rex', { image: 'acme/t-rex:0.26.8' }, 'image'],
    ['a version word: acme/lolminer-1.88', { image: 'acme/lolminer-1.88' }, 'image'],
    ['a glued version: acme/hashcat6', { image: 'acme/hashcat6' }, 'image'],
    ['a miner namespace: xmrig/base', { image: 'xmrig/base' }, 'image'],
    ['openwall/john (John the Ripper)', { image: 'openwall/john:latest' }, 'image'],
    ['acme/john-the-ripper', { image: 'acme/john-the-ripper' }, 'image'],
    ['acme/thc-hydra', { image: 'acme/thc-hydra:9.5' }, 'image'],
    [
      'a private registry with a digest',
      { image: `registry.example.com:5000/mirror/phoenixminer@sha256:${'a'.repeat(64)}` },
      'image',
    ],
  ]);
});

t.test('behavior: banned_image accepts names that only contain a tool name inside a word', async (t) => {
  table(t, 'banned_image', [
    ['acme/dataminer-etl', { image: 'acme/dataminer-etl' }, null],
    ['ml/transformer-miner-analysis', { image: 'ml/transformer-miner-analysis' }, null],
    ['acme/miner ("miner" alone is not a tool)', { image: 'acme/miner:1' }, null],
    ['acme/t-rex-runner (the dinosaur game)', { image: 'acme/t-rex-runner' }, null],
    ['oryd/hydra (Ory Hydra, an OAuth2 server)', { image: 'oryd/hydra:v2.2' }, null],
    ['acme/john (a person, not the cracker)', { image: 'acme/john' }, null],
    ['acme/hashcatalog (a longer word)', { image: 'acme/hashcatalog' }, null],
    ['a CUDA base image', { image: 'pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime' }, null],
  ]);
});

t.test('behavior: every built-in tool is refused as a repository, with packaging and version words, but not glued to a word', async (t) => {
  for (const tool of BUILTIN_BANNED_IMAGES) {
    t.same(hits(t, request({ image: `acme/${tool.name}` })), ['banned_image image'], tool.name);
    t.same(hits(t, request({ image: `ghcr.io/acme/${tool.name}-cuda-12:1.0` })), ['banned_image image'], `${tool.name}-cuda-12`);
    t.same(hits(t, request({ image: `acme/my${tool.name}` })), [], `my${tool.name}`);
  }
  const message = evaluatePolicy(request({ image: 'acme/nbminer' })).findings[0]?.message;
  t.equal(message, 'image is banned: "acme/nbminer" is nbminer, a cryptocurrency miner');
});

t.test('args: bannedImages, an exact repository', async (t) => {
  const options = { bannedImages: ['acme/forbidden'] };
  table(t, 'banned_image', [
    ['with a tag', { image: 'acme/forbidden:1.0' }, 'image'],
    ['with docker.io', { image: 'docker.io/acme/forbidden' }, 'image'],
    ['on another registry (a mirror)', { image: 'ghcr.io/acme/forbidden@sha256:' + 'b'.repeat(64) }, 'image'],
    ['a longer name', { image: 'acme/forbidden-extra' }, null],
    ['a deeper path', { image: 'acme/forbidden/sub' }, null],
    ['another namespace', { image: 'acmecorp/forbidden' }, null],
  ], options);
  t.match(evaluatePolicy(request({ image: 'acme/forbidden:1.0' }), options).findings[0]?.message, /list of banned images \("acme\/forbidden"\)/);
});

t.test('args: bannedImages, a repository on one registry', async (t) => {
  table(t, 'banned_image', [
    ['that registry', { image: 'ghcr.io/acme/tool:2' }, 'image'],
    ['Docker Hub', { image: 'acme/tool' }, null],
    ['another registry', { image: 'quay.io/acme/tool' }, null],
  ], { bannedImages: ['ghcr.io/acme/tool'] });
  table(t, 'banned_image', [
    ['docker.io/acme/tool bans the Docker Hub repository', { image: 'acme/tool' }, 'image'],
    ['not the same path on another registry', { image: 'ghcr.io/acme/tool' }, null],
  ], { bannedImages: ['docker.io/acme/tool'] });
});

t.test('args: bannedImages with a * suffix', async (t) => {
  table(t, 'banned_image', [
    ['acme/* bans a repository of the namespace', { image: 'acme/anything:1' }, 'image'],
    ['acme/* bans a deeper path', { image: 'acme/team/app' }, 'image'],
    ['acme/* on another registry', { image: 'ghcr.io/acme/app' }, 'image'],
    ['acme/* does not ban acmecorp/', { image: 'acmecorp/app' }, null],
  ], { bannedImages: ['acme/*'] });
  table(t, 'banned_image', [
    ['acme/tool* bans acme/tool', { image: 'acme/tool' }, 'image'],
    ['acme/tool* bans acme/toolbox', { image: 'acme/toolbox' }, 'image'],
    ['acme/tool* does not ban acme/to', { image: 'acme/to' }, null],
  ], { bannedImages: ['acme/tool*'] });
  table(t, 'banned_image', [
    ['ghcr.io/* bans the registry', { image: 'ghcr.io/anyone/app' }, 'image'],
    ['ghcr.io/* leaves Docker Hub alone', { image: 'anyone/app' }, null],
  ], { bannedImages: ['ghcr.io/*'] });
});

t.test('args: bannedImages is normalized like images: case, library/ and docker.io', async (t) => {
  t.same(hits(t, request({ image: 'ubuntu:22.04' }), { bannedImages: ['library/ubuntu'] }), ['banned_image image']);
  t.same(hits(t, request({ image: 'docker.io/library/ubuntu' }), { bannedImages: ['ubuntu'] }), ['banned_image image']);
  t.same(hits(t, request({ image: 'acme/tool' }), { bannedImages: [' ACME/Tool '] }), ['banned_image image']);
  t.same(hits(t, request({ image: 'ubuntu-extra' }), { bannedImages: ['ubuntu'] }), []);
});

t.test('error: TypeError for a bannedImages entry that is not a pattern', async (t) => {
  const invalid = ['', '*', 'acme/tool:1.0', `acme/tool@sha256:${'c'.repeat(64)}`, 'acme/*/x', 'library/*', 'Acme Tool', '/acme'];
  t.plan(invalid.length * 2);
  for (const entry of invalid) {
    t.equal(parseBannedImagePattern(entry), null, `${JSON.stringify(entry)} is not a pattern`);
    t.throws(() => evaluatePolicy(request({}), { bannedImages: [entry] }), TypeError, `${JSON.stringify(entry)} throws`);
  }
});

t.test('behavior: mining_signature refuses pool URLs, pool hosts, miners and miner options', async (t) => {
  table(t, 'mining_signature', [
    ['a stratum URL in env', { env: { POOL: 'stratum+tcp://pool.example.com:3333' } }, 'env.POOL'],
    ['stratum+ssl', { command: ['./run', '--pool', 'stratum+ssl://pool.example.com:443'] }, 'command[2]'],
    ['stratum2+tcp', { command: ['./run', '-P', 'stratum2+tcp://x.example.com:4444'] }, 'command[2]'],
    ['stratum://', { env: { ARGS: '-o stratum://pool.example.com:3333 -u x' } }, 'env.ARGS'],
    ['a pool host without a scheme', { command: ['./run', '--server', 'xmr-eu1.nanopool.org:14444'] }, 'command[2]'],
    ['a pool host in a URL', { env: { ENDPOINT: 'https://gulf.moneroocean.stream:10128' } }, 'env.ENDPOINT'],
    ['xmrig as the program', { command: ['xmrig', '-c', '/input/cfg/config.json'] }, 'command[0]'],
    ['a miner behind wrappers', { command: ['nohup', 'nice', '-n', '10', 'timeout', '3600', '/opt/t-rex', '-c', 'cfg.json'] }, 'command[6]'],
    ['a miner in an sh -c script', { command: ['sh', '-c', 'cd /opt && FOO=1 ./lolminer --config x.cfg > /dev/null 2>&1 &'] }, 'command[2]'],
    ['a miner in a nested script', { command: ['bash', '-lc', 'exec sh -c "PhoenixMiner.exe -epool x"'] }, 'command[2]'],
    ['--donate-level', { command: ['./run', '--donate-level=1'] }, 'command[1]'],
    ['--randomx-1gb-pages', { command: ['./run', '--randomx-1gb-pages'] }, 'command[1]'],
    ['-a ethash', { command: ['./run', '-a', 'ethash'] }, 'command[1]'],
    ['--algo rx/0', { command: ['./run', '--algo', 'rx/0'] }, 'command[1]'],
    ['--algo=kawpow', { command: ['./run', '--algo=kawpow'] }, 'command[1]'],
    ['ALGO=autolykos2 in env', { env: { ALGO: 'autolykos2' } }, 'env.ALGO'],
  ]);
});

t.test('behavior: mining_signature refuses weak evidence only in combination, as one finding', async (t) => {
  table(t, 'mining_signature', [
    ['--coin with a wallet as --user', { command: ['./run', '--coin', 'monero', '--user', XMR] }, 'command[1]'],
    ['--coin with a wallet.worker', { command: ['python', 'run.py', '--coin', 'ETH', '--user', `${ETH}.rig1`] }, 'command[2]'],
    ['--cuda-devices with a pool address', { command: ['./run', '--cuda-devices', '0,1', '-o', 'pool.example.com:3333'] }, 'command[1]'],
    ['env COIN and WALLET', { env: { COIN: 'rvn', WALLET: 'RKyzBgxkP3ecN7kYy4pNMzNBPH9CQz3ex9' } }, 'env.COIN'],
    ['a Monero address anywhere with --nicehash', { command: ['./run', '--nicehash'], env: { TARGET: XMR } }, 'command[1]'],
  ]);
  const message = evaluatePolicy(request({ command: ['./run', '--coin', 'monero', '--user', XMR] })).findings[0]?.message;
  t.equal(message, 'command[1] looks like cryptocurrency mining: the mining coin "monero" (--coin), together with a wallet address as --user in command[3]');
});

t.test('behavior: mining_signature accepts near misses', async (t) => {
  table(t, 'mining_signature', [
    ['--coin-flip', { command: ['python', 'train.py', '--coin-flip', '0.5'] }, null],
    ['--coin ETH alone (a trading back-test)', { command: ['python', 'backtest.py', '--coin', 'ETH'] }, null],
    ['--coin with an unknown coin', { command: ['python', 'toss.py', '--coin', 'heads', '--user', 'alice'] }, null],
    ['--algo adam', { command: ['python', 'train.py', '--algo', 'adam'] }, null],
    ['-a 3', { command: ['python', 'train.py', '-a', '3'] }, null],
    ['the word stratum', { command: ['python', 'stratum_analysis.py', '--stratum-level', '2'] }, null],
    ['a link about strata', { env: { DOCS: 'https://en.wikipedia.org/wiki/Stratum' } }, null],
    ['a host that only ends like a pool', { command: ['curl', '-fsS', 'https://mynanopool.org/x', 'https://nanopool.org.example.com/'] }, null],
    ['an Ethereum address alone (a contract)', { command: ['python', 'index.py', '--contract', ETH], env: { ADDRESS: ETH } }, null],
    ['a miner name as data, not as the program', { command: ['grep', '-r', 'xmrig', '/input/logs'] }, null],
    ['t-rex as an argument', { command: ['python', 'play.py', '--env', 't-rex'] }, null],
    ['a pool address alone', { command: ['./client', '--url', 'api.example.com:8080'] }, null],
    ['ALGO naming something else', { env: { ALGO: 'ppo' } }, null],
  ]);
});

t.test('behavior: every miner program, pool domain and cracker program is refused', async (t) => {
  for (const name of MINER_PROGRAMS) t.same(hits(t, request({ command: [`/opt/bin/${name}`] })), ['mining_signature command[0]'], name);
  for (const domain of MINING_POOL_DOMAINS) {
    t.same(hits(t, request({ command: ['./run', `eu1.${domain}:4444`] })), ['mining_signature command[1]'], domain);
    t.same(hits(t, request({ command: ['./run', `not${domain}`] })), [], `not${domain}`);
  }
  for (const name of CRACKER_PROGRAMS) t.same(hits(t, request({ command: [name, 'input.txt'] })), ['cracking_signature command[0]'], name);
});

t.test('behavior: cracking_signature refuses crackers and cracker option combinations', async (t) => {
  table(t, 'cracking_signature', [
    ['hashcat with its options: one finding, the program', { command: ['hashcat', '-m', '1000', '-a', '3', 'hashes.txt', '?a?a?a?a?a?a'] }, 'command[0]'],
    ['a renamed hashcat: -m, -a and a hash file', { command: ['./hc.bin', '-m', '1000', '-a', '0', 'hashes.txt', 'words.txt'] }, 'command[1]'],
    ['glued -m0 -a3 with a value-less option before the hash file', { command: ['./hc', '-m0', '-a3', '--force', 'h.txt'] }, 'command[1]'],
    ['--hash-type and --attack-mode', { command: ['./hc', '--hash-type=22000', '--attack-mode=0', 'capture.txt'] }, 'command[1]'],
    ['john in a script', { command: ['sh', '-c', 'john --wordlist=/input/w/rockyou.txt --format=nt /input/h/hashes.txt'] }, 'command[2]'],
    ['john options in a renamed binary', { command: ['./jtr', '--wordlist=words.txt', '--format=raw-md5', 'hashes.txt'] }, 'command[1]'],
    ['THC Hydra', { command: ['hydra', '-l', 'admin', '-P', 'pass.txt', 'ssh://203.0.113.7'] }, 'command[0]'],
    ['THC Hydra with a service URL only', { command: ['hydra', 'http-post-form://203.0.113.7/login:u=^USER^:F=bad'] }, 'command[0]'],
    ['a potfile option with an attack mode', { command: ['./tool', '--potfile-path', '/output/pot', '-a', '3'] }, 'command[1]'],
    ['a capture file with a wordlist option', { command: ['./tool', 'capture.hc22000', '--wordlist', 'w.txt'] }, 'command[1]'],
    ['a mask and a hash mode in env', { env: { MASK: '?u?l?l?l?d?d', MODE_ARGS: '-m 1400' } }, 'env.MASK'],
    ['aircrack-ng', { command: ['aircrack-ng', '-w', 'words.txt', 'capture.cap'] }, 'command[0]'],
  ]);
});

t.test('behavior: cracking_signature accepts near misses', async (t) => {
  table(t, 'cracking_signature', [
    ['-a 3 alone', { command: ['python', 'train.py', '-a', '3'] }, null],
    ['-m and -a without a hash file', { command: ['./sim', '-m', '5', '-a', '3', '--lr', '0.1'] }, null],
    ['-m and -a in different places', { command: ['./sim', '-a', '3'], env: { OPTS: '-m 5' } }, null],
    ['python -m', { command: ['python', '-m', 'torch.distributed.run', 'train.py'] }, null],
    ['--wordlist alone', { command: ['python', 'tokenize.py', '--wordlist', 'vocab.txt'] }, null],
    ['--format=zip alone', { command: ['python', 'convert.py', '--format=zip', 'data'] }, null],
    ['--format with an ordinary format and --wordlist', { command: ['python', 'x.py', '--format', 'json', '--wordlist', 'v.txt'] }, null],
    ['Ory Hydra', { command: ['hydra', 'serve', 'all', '--dev'] }, null],
    ['Ory Hydra with an endpoint URL', { command: ['hydra', 'create', 'client', '--endpoint', 'http://127.0.0.1:4445', '--name', 'x'] }, null],
    ['a question mark in a URL', { command: ['curl', 'https://example.com/?a=1&b=2'] }, null],
  ]);
});

t.test('behavior: privilege_request refuses privileged programs, host paths, runtime flags and env', async (t) => {
  table(t, 'privilege_request', [
    ['nsenter', { command: ['nsenter', '-t', '1', '-m', '-u', '-i', '-n', 'sh'] }, 'command[0]'],
    ['chroot /host', { command: ['chroot', '/host', '/bin/bash'] }, 'command[1]'],
    ['mount behind sudo', { command: ['sudo', 'mount', '-t', 'proc', 'proc', '/mnt'] }, 'command[1]'],
    ['modprobe', { command: ['modprobe', 'nvidia_uvm'] }, 'command[0]'],
    ['insmod in a script', { command: ['sh', '-c', 'insmod /input/m/evil.ko'] }, 'command[2]'],
    ['setcap', { command: ['setcap', 'cap_net_raw+ep', '/usr/bin/ping'] }, 'command[0]'],
    ['capsh --', { command: ['capsh', '--', '-c', 'id'] }, 'command[0]'],
    ['docker (Docker-in-Docker)', { command: ['docker', 'run', 'alpine'] }, 'command[0]'],
    ['the docker socket', { command: ['python', 'app.py', '--socket', '/var/run/docker.sock'] }, 'command[3]'],
    ['sysrq in a script', { command: ['sh', '-c', 'echo b > /proc/sysrq-trigger'] }, 'command[2]'],
    ['/dev/mem', { command: ['dd', 'if=/dev/mem', 'of=/output/mem.bin'] }, 'command[1]'],
    ['a raw disk', { command: ['dd', 'if=/dev/nvme0n1', 'of=/output/disk.img'] }, 'command[1]'],
    ['release_agent', { env: { HOOK: '/sys/fs/cgroup/rdma/release_agent' } }, 'env.HOOK'],
    ['sysctl -w', { command: ['sysctl', '-w', 'vm.overcommit_memory=1'] }, 'command[0]'],
    ['--privileged passed to an entrypoint', { command: ['./entry', '--privileged'] }, 'command[1]'],
    ['--pid=host', { command: ['./entry', '--pid=host'] }, 'command[1]'],
    ['--cap-add', { env: { EXTRA: '--cap-add SYS_ADMIN' } }, 'env.EXTRA'],
    ['--security-opt seccomp=unconfined', { command: ['./entry', '--security-opt', 'seccomp=unconfined'] }, 'command[1]'],
    ['NVIDIA_VISIBLE_DEVICES', { env: { NVIDIA_VISIBLE_DEVICES: 'all' } }, 'env.NVIDIA_VISIBLE_DEVICES'],
    ['NVIDIA_MIG_CONFIG_DEVICES', { env: { NVIDIA_MIG_CONFIG_DEVICES: 'all' } }, 'env.NVIDIA_MIG_CONFIG_DEVICES'],
    ['DOCKER_HOST', { env: { DOCKER_HOST: 'tcp://10.0.0.1:2375' } }, 'env.DOCKER_HOST'],
    ['a Docker-in-Docker image', { image: 'docker:27-dind' }, 'image'],
    ['a dind image of another name', { image: 'cruizba/ubuntu-dind:latest' }, 'image'],
  ]);
});

t.test('behavior: privilege_request accepts near misses', async (t) => {
  table(t, 'privilege_request', [
    ['chroot into the job own directory', { command: ['chroot', '/opt/sysroot', '/bin/true'] }, null],
    ['mount as a word in a program name or option', { command: ['python', 'mount_check.py', '--mount-point', '/data'] }, null],
    ['mount in a prompt', { command: ['python', 'gen.py', '--prompt', 'mount everest at sunrise; a docker whale'] }, null],
    ['capsh --print', { command: ['capsh', '--print'] }, null],
    ['mount listing the mounts', { command: ['sh', '-c', 'mount | grep nvidia'] }, null],
    ['a program named ctr (click-through rate)', { command: ['./ctr', 'train', '--epochs', '3'] }, null],
    ['sysctl reading', { command: ['sysctl', 'vm.swappiness'] }, null],
    ['pip install docker', { command: ['sh', '-c', 'pip install docker && python app.py'] }, null],
    ['sudo apt-get', { command: ['sudo', 'apt-get', 'install', '-y', 'git'] }, null],
    ['ordinary device and host-like paths', { command: ['ls', '/dev/shm', '/dev/nvidia0', '/dev/null', '/etc/hostname', '/data/host/x'] }, null],
    ['--network with a model name', { command: ['python', 'train.py', '--network', 'resnet50', '--pid', '7'] }, null],
    ['CUDA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES', { env: { CUDA_VISIBLE_DEVICES: '0,1', NVIDIA_DRIVER_CAPABILITIES: 'all' } }, null],
    ['the docker CLI image', { image: 'docker:27-cli' }, null],
  ]);
});

t.test('behavior: lan_egress refuses LAN, loopback, metadata and address-in-name names that pass the schema', async (t) => {
  const refused = [
    'printer.local', 'metadata.google.internal', 'foo.localhost', 'nas.home.arpa', 'db.internal', 'files.lan', 'git.corp',
    'wiki.intranet', 'vault.private', 'db.default.svc', 'mail.home', 'www.example', 'x.test',
    '10.0.0.5.nip.io', '127-0-0-1.sslip.io', 'localtest.me', 'app.lvh.me', 'PRINTER.LOCAL',
    '127.0x1', '0x7f.0x0.0x0.0x1', '10.0xa',
  ];
  for (const name of refused) {
    t.same(hits(t, request({ networkPolicy: { mode: 'allowlist', allow: ['api.example.com', name] } })), ['lan_egress networkPolicy.allow[1]'], name);
  }
});

t.test('behavior: lan_egress refuses IP literals and single labels even past the schema', async (t) => {
  const cases: [string, RegExp][] = [
    ['10.0.0.5', /IP address literal \(10\.0\.0\.5, private network 10\.0\.0\.0\/8\)/],
    ['2130706433', /\(127\.0\.0\.1, loopback\)/],
    ['0x7f000001', /\(127\.0\.0\.1, loopback\)/],
    ['017700000001', /\(127\.0\.0\.1, loopback\)/],
    ['127.1', /\(127\.0\.0\.1, loopback\)/],
    ['169.254.169.254', /cloud metadata address/],
    ['169.254.1.1', /link-local/],
    ['100.64.1.1', /carrier-grade NAT/],
    ['172.20.0.1', /private network 172\.16\.0\.0\/12/],
    ['192.168.1.1', /private network 192\.168/],
    ['0.0.0.0', /this network/],
    ['8.8.8.8', /8\.8\.8\.8, a public address\); the allowlist takes public DNS names only/],
    ['999.1.1.1', /not a valid IPv4 address/],
    ['[::1]', /::1, loopback/],
    ['::ffff:127.0.0.1', /IPv4-mapped 127\.0\.0\.1, loopback/],
    ['fd00:ec2::254', /cloud metadata address/],
    ['fe80::1%eth0', /link-local/],
    ['fc00::1', /unique local/],
    ['db', /single-label/],
    ['localhost', /loopback interface/],
    ['metadata', /metadata service/],
    ['instance-data', /metadata service/],
    ['*.example.com', /not a DNS host name/],
    ['api.example.com:443', /not a DNS host name/],
  ];
  for (const [name, message] of cases) {
    t.equal(parseJobCreateRequest({ image: 'busybox', gpu: { count: 1 }, networkPolicy: { mode: 'allowlist', allow: [name] } }).ok, false, `the schema refuses ${name} first`);
    const result = evaluatePolicy(withAllow(['api.example.com', name]));
    t.same(result.findings.map((f) => `${f.rule} ${f.field}`), ['lan_egress networkPolicy.allow[1]'], name);
    t.match(result.findings[0]?.message, message, `${name}: ${result.findings[0]?.message}`);
  }
});

t.test('behavior: lan_egress accepts public names that only look local', async (t) => {
  const accepted = [
    'api.example.com', 'huggingface.co', 'local.example.com', 'internal-api.example.com', 'lan.example.net', 'corp.example.org',
    'localhost.example.com', 'nip.io.example.com', 'snip.io', 'metadata.example.com', 'example.community', 'xn--bcher-kva.example',
  ].filter((name) => !name.endsWith('.example'));
  t.same(hits(t, request({ networkPolicy: { mode: 'allowlist', allow: accepted } })), []);
  for (const name of accepted) t.equal(lanEgressReason(name), null, name);
  t.same(hits(t, request({ networkPolicy: { mode: 'none' } })), [], 'mode none has no allowlist to check');
});

t.test('behavior: every finding is collected, in rule order then request order', async (t) => {
  const req = request({
    image: 'xmrig/xmrig:6.21',
    command: ['sh', '-c', 'docker run alpine', '--pool', 'stratum+tcp://a.example.com:3333'],
    env: { POOL: 'stratum+ssl://b.example.com:443', NVIDIA_VISIBLE_DEVICES: 'all', WORDS: 'rockyou.txt --format=nt' },
    networkPolicy: { mode: 'allowlist', allow: ['printer.local', 'api.example.com', 'metadata.google.internal'] },
  });
  t.same(hits(t, req), [
    'banned_image image',
    'mining_signature command[4]',
    'mining_signature env.POOL',
    'cracking_signature env.WORDS',
    'privilege_request command[2]',
    'privilege_request env.NVIDIA_VISIBLE_DEVICES',
    'lan_egress networkPolicy.allow[0]',
    'lan_egress networkPolicy.allow[2]',
  ]);
  t.equal(evaluatePolicy(req).verdict, 'rejected');
});

t.test('behavior: one finding per field lists all its evidence', async (t) => {
  const result = evaluatePolicy(request({ command: ['sh', '-c', 'nohup ./xmrig -o xmr-eu1.nanopool.org:14444 --donate-level 1 &'] }));
  t.same(result.findings, [
    {
      rule: 'mining_signature',
      field: 'command[2]',
      message:
        'command[2] looks like cryptocurrency mining: the mining pool host "xmr-eu1.nanopool.org"; runs xmrig, a cryptocurrency miner; the miner option --donate-level',
    },
  ]);
});

t.test('behavior: long values are quoted short in messages', async (t) => {
  const url = `stratum+tcp://${'a'.repeat(200)}.example.com:3333`;
  const message = evaluatePolicy(request({ env: { POOL: url } })).findings[0]?.message ?? '';
  t.ok(message.length < 200, message);
  t.match(message, /…"$/);
});
