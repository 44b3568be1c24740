import { type CommandOption, type SimpleCommand, optionsOf, programName } from './command-words.js';
import { quote, type Signal } from './findings.js';
import { BUILTIN_BANNED_IMAGES } from './images.js';

/**
 * The `mining_signature` and `cracking_signature` rules: evidence of cryptocurrency mining or
 * password cracking in the command and the env values (env names only give meaning to their
 * values: `ALGO=kawpow`, `WALLET=<address>`).
 *
 * Strong evidence refuses on its own: a stratum URL, a known pool host, a miner or cracker run as
 * the program (`xmrig`, `nohup ./t-rex`, `sh -c 'hashcat …'`), xmrig's `--donate-level` and
 * `--randomx-*` options, a mining algorithm given to `-a`/`--algo`. Weak evidence is what
 * legitimate programs also use (`--coin eth` in a trading back-test, `-a 3`, `-m 1000`,
 * `--wordlist`, `--format=zip`): it refuses only when two different kinds of it meet in one job,
 * and hashcat's `-m <mode>` with `-a <attack>` also needs an operand (the hash file).
 */

/** Program names (basenames, lower case) that are miners. */
export const MINER_PROGRAMS: ReadonlySet<string> = new Set([
  ...BUILTIN_BANNED_IMAGES.filter((tool) => tool.kind === 'miner').map((tool) => tool.name),
  'xmrigdaemon', 'xmrigminer', 'xmr-stak-cpu', 'xmr-stak-nvidia', 'xmr-stak-amd', 'ethdcrminer64', 'nsgpucnminer',
]);

/** Program names that are password crackers whatever their arguments. */
export const CRACKER_PROGRAMS: ReadonlySet<string> = new Set([
  'hashcat', 'hashcat.bin', 'hashcat32', 'hashcat64', 'hashcat32.bin', 'hashcat64.bin', 'oclhashcat', 'oclhashcat64',
  'cudahashcat', 'cudahashcat64', 'john', 'john-the-ripper', 'aircrack-ng', 'cowpatty', 'pyrit', 'ncrack',
]);

/** `hydra` is also Ory's OAuth2 server: it is THC Hydra only with login or password options. */
const HYDRA_PROGRAMS: ReadonlySet<string> = new Set(['hydra', 'thc-hydra', 'xhydra']);
const HYDRA_LOGIN_OPTIONS: ReadonlySet<string> = new Set(['-l', '-L', '-p', '-P', '-C', '-x']);

/** Well-known mining pools; a host equal to one or under it is a signature. */
export const MINING_POOL_DOMAINS = [
  'nanopool.org', '2miners.com', 'f2pool.com', 'ethermine.org', 'hashvault.pro', 'supportxmr.com', 'minexmr.com',
  'herominers.com', 'unmineable.com', 'moneroocean.stream', 'nicehash.com', 'miningpoolhub.com', 'flexpool.io',
  'hiveon.net', 'woolypooly.com', 'zpool.ca', 'zergpool.com', 'prohashing.com', 'c3pool.com', 'xmrpool.eu',
  'monerohash.com', 'minergate.com', 'p2pool.io', 'k1pool.com', 'kryptex.network', 'antpool.com', 'viabtc.com',
  'poolin.com', 'slushpool.com', 'ezil.me', 'crazypool.org', 'solopool.org', 'rplant.xyz', 'mining-dutch.nl',
  'suprnova.cc', 'dxpool.com', 'miningrigrentals.com', 'ethpool.org', 'sparkpool.com',
] as const;

/**
 * Pool URL schemes of stratum and of ethminer's variants (`stratum+tcp://`, `stratum2+ssl://`,
 * `ethproxy+tcp://`). Bounded repetitions keep the scan linear on hostile input.
 */
const POOL_URL = /(?:stratum[0-9]{0,2}|ethproxy|ethstratum[0-9a-z]{0,8}|ethnh)(?:\+[a-z0-9]{1,8}){0,2}:\/\/[^\s'"]{0,200}/i;

/** Proof-of-work algorithms (as miners spell them); nothing else calls an algorithm this. */
const MINING_ALGORITHMS: ReadonlySet<string> = new Set([
  'randomx', 'randomarq', 'randomwow', 'cryptonight', 'cryptonightr', 'cryptonight-heavy', 'cryptonight-lite', 'ethash',
  'etchash', 'ubqhash', 'kawpow', 'firopow', 'progpow', 'progpowz', 'evrprogpow', 'meowpow', 'autolykos', 'autolykos2',
  'kheavyhash', 'octopus', 'beamhash', 'beamhashii', 'beamhashiii', 'equihash', 'zhash', 'zelhash', 'cuckatoo31',
  'cuckatoo32', 'cuckaroo29', 'cuckaroom29', 'cuckarood29', 'x16r', 'x16rv2', 'x16rt', 'x16s', 'x21s', 'x22i', 'x25x',
  'lyra2z', 'lyra2rev3', 'lyra2v3', 'mtp', 'verushash', 'astrobwt', 'ghostrider', 'karlsenhash', 'pyrinhash', 'nexapow',
  'sha512256d', 'dynexsolve', 'fishhash', 'xelishash', 'abelhash', 'ethashb3',
]);
/** xmrig's families (`rx/0`, `cn/r`, `argon2/chukwa`) and equihash parameter sets. */
const MINING_ALGORITHM_FAMILY = /^(?:rx|cn|cn-heavy|cn-lite|cn-pico|cn-ultralite|argon2|astrobwt|kawpow)\/[a-z0-9]+$|^equihash[0-9_,]+$/;

/** Coins people mine on GPUs and CPUs; `--coin` naming one is weak evidence. */
const MINING_COINS: ReadonlySet<string> = new Set([
  'xmr', 'monero', 'eth', 'ethereum', 'etc', 'rvn', 'ravencoin', 'erg', 'ergo', 'kas', 'kaspa', 'flux', 'zec', 'zcash',
  'beam', 'firo', 'cfx', 'conflux', 'neox', 'neoxa', 'xna', 'clore', 'zeph', 'zephyr', 'btg', 'grin', 'ctxc', 'nexa',
  'iron', 'ironfish', 'alph', 'alephium', 'dnx', 'dynex', 'rtm', 'raptoreum', 'xhv', 'haven', 'wow', 'wownero', 'vrsc',
  'verus', 'ltc', 'litecoin', 'doge', 'dogecoin', 'btc', 'bitcoin', 'bch', 'zen', 'dero', 'kls', 'karlsen', 'octa',
  'mewc', 'meowcoin',
]);

const ALGO_OPTIONS: ReadonlySet<string> = new Set(['-a', '--algo', '--algorithm', '-algo', '--algos']);
const COIN_OPTIONS: ReadonlySet<string> = new Set(['--coin', '-coin', '--currency']);
const USER_OPTIONS: ReadonlySet<string> = new Set(['-u', '--user', '--username', '--wallet', '-wal', '-ewal', '--address', '-user']);
const POOL_OPTIONS: ReadonlySet<string> = new Set(['-o', '--url', '-P', '--pool', '-pool', '-epool', '--server']);
/** Options only miners have; weak because a name alone is little to go on. */
const MINER_OPTIONS: ReadonlySet<string> = new Set(['--cuda-devices', '--opencl-devices', '--no-cpu', '--cuda-loader', '--nicehash', '--rig-id']);
/** Options that only xmrig has, refused on their own. */
const XMRIG_OPTIONS = /^--(?:donate-level|donate-over-proxy|randomx-[a-z0-9-]+)$/;

const XMR_ADDRESS = '[48][0-9AB][1-9A-HJ-NP-Za-km-z]{93}(?:[1-9A-HJ-NP-Za-km-z]{11})?';
const ETH_ADDRESS = '0x[0-9a-fA-F]{40}';
const OTHER_ADDRESS = 'kaspa:[a-z0-9]{61,63}|bc1[02-9ac-hj-np-z]{11,71}|R[1-9A-HJ-NP-Za-km-z]{33}';
/** A worker name or a fixed difficulty after an address: `.rig1`, `/rig1`, `+50000`. */
const WORKER = '(?:[./+:][A-Za-z0-9_-]+)*';
const WALLET = new RegExp(`^(?:${XMR_ADDRESS}|${ETH_ADDRESS}|${OTHER_ADDRESS})${WORKER}$`);
/** Wallets recognisable anywhere: Monero addresses, and any address with a worker name. */
const STANDALONE_WALLET = new RegExp(`^(?:${XMR_ADDRESS}${WORKER}|(?:${ETH_ADDRESS}|${OTHER_ADDRESS})[./][A-Za-z0-9_-]+)$`);
const POOL_ADDRESS = /^(?:[a-z0-9+]+:\/\/)?(?:[a-z0-9-]+\.)+[a-z]{2,}:[0-9]{2,5}\/?$/i;

/** hashcat's attack modes and a hash mode number. */
const ATTACK_MODE = /^[0-9]$/;
const HASH_MODE = /^[0-9]{1,5}$/;
/** hashcat / John option names. */
const HASH_MODE_OPTIONS: ReadonlySet<string> = new Set(['-m', '--hash-type']);
const ATTACK_MODE_OPTIONS: ReadonlySet<string> = new Set(['-a', '--attack-mode']);
const POTFILE_OPTIONS = /^--(?:potfile-path|potfile-disable|pot)$/;
/** John's hash formats, the ones people crack. */
const JOHN_FORMATS = /^(?:raw-(?:md5|sha1|sha256|sha512)|nt|lm|bcrypt|md5crypt|sha256crypt|sha512crypt|descrypt|pkzip|zip|rar5?|7z|pdf|office|wpapsk|krb5tgs|krb5asrep|netntlmv2|netntlm|mscash2?|mysql-sha1|keepass|bitcoin|ethereum|ssh)(?:-opencl)?$/i;
/** hashcat masks: three or more placeholders such as `?a?a?a` or `?1?d?d`. */
const MASK = /(?:\?[ludhHsab1-4]){3,}/;
const CAPTURE_FILE = /\.(?:hccapx|hccap|hc22000|22000|16800)$/i;
const KNOWN_WORDLIST = /^(?:rockyou|crackstation|weakpass)[\w.-]*$/i;
/** A cheap test that a word may be one of the two above. */
const CRACKING_FILE_HINT = /hccap|hc22000|22000|16800|rockyou|crackstation|weakpass/i;
/** hashcat flags without a value, so the word after them may be the hash file. */
const HASHCAT_BOOLEAN_OPTIONS: ReadonlySet<string> = new Set(['-O', '--force', '--status', '--quiet', '--increment', '--show', '--left', '--username', '--remove', '-S']);

/** One job's command and env, read for signatures. */
export interface SignatureInput {
  commands: readonly SimpleCommand[];
  /** Each argv element and env value as it was sent, with its field. */
  strings: readonly { text: string; field: string }[];
  env: readonly { name: string; value: string; field: string }[];
}

/** The mining and cracking signals of a job (weak evidence only when it combines, as one signal). */
export function signatureSignals(input: SignatureInput): Signal[] {
  const mining = new Collector('mining_signature');
  const cracking = new Collector('cracking_signature');

  for (const { text, field } of input.strings) {
    const url = POOL_URL.exec(text);
    if (url !== null) mining.strong(field, `a mining pool URL ${quote(url[0])}`);
    const lower = text.toLowerCase();
    if (MINING_POOL_DOMAINS.some((domain) => lower.includes(domain))) {
      for (const host of hostsIn(lower)) {
        if (isUnderPoolDomain(host)) mining.strong(field, `the mining pool host ${quote(host)}`);
      }
    }
  }

  let hashcatCall = false;
  for (const command of input.commands) {
    const name = command.programName;
    const options = optionsOf(command);
    if (name !== null && command.program !== null) {
      if (MINER_PROGRAMS.has(name)) mining.strong(command.program.field, `runs ${name}, a cryptocurrency miner`);
      if (CRACKER_PROGRAMS.has(name)) cracking.strong(command.program.field, `runs ${name}, a password cracker`);
      if (HYDRA_PROGRAMS.has(name) && isHydraAttack(command, options)) {
        cracking.strong(command.program.field, `runs ${name} with login or password-list options, a network login cracker`);
      }
    }
    for (const option of options) {
      miningOption(option, mining);
      crackingOption(option, cracking);
    }
    const mode = options.some((o) => HASH_MODE_OPTIONS.has(o.name) && o.value !== null && HASH_MODE.test(o.value));
    const attack = options.some((o) => ATTACK_MODE_OPTIONS.has(o.name) && o.value !== null && ATTACK_MODE.test(o.value));
    if (mode && attack && hasOperand(command)) hashcatCall = true;
    for (const word of command.args) {
      const text = word.text;
      if (text.length >= 40 && STANDALONE_WALLET.test(text)) mining.weak('wallet', word.field, 'a wallet address');
      const mask = text.includes('?') ? MASK.exec(text) : null;
      if (mask !== null) cracking.weak('mask', word.field, `a brute-force mask ${quote(mask[0])}`);
      if (CRACKING_FILE_HINT.test(text)) {
        const base = programName(text);
        if (CAPTURE_FILE.test(base)) cracking.weak('capture-file', word.field, `a WPA capture file ${quote(base)}`);
        if (KNOWN_WORDLIST.test(base)) cracking.weak('known-wordlist', word.field, `the password list ${quote(base)}`);
      }
    }
  }

  for (const { name, value, field } of input.env) {
    const segments = new Set(name.toUpperCase().split(/_+/));
    const v = value.trim().toLowerCase();
    if (['ALGO', 'ALGOS', 'ALGORITHM'].some((s) => segments.has(s)) && isMiningAlgorithm(v)) {
      mining.strong(field, `the mining algorithm ${quote(value)}`);
    }
    if (['COIN', 'CURRENCY'].some((s) => segments.has(s)) && MINING_COINS.has(v)) mining.weak('coin', field, `the mining coin ${quote(value)}`);
    if (['WALLET', 'USER', 'USERNAME', 'ADDRESS', 'ADDR', 'WORKER', 'ACCOUNT'].some((s) => segments.has(s)) && WALLET.test(value.trim())) {
      mining.weak('wallet', field, 'a wallet address');
    }
    if (['POOL', 'POOLS', 'STRATUM'].some((s) => segments.has(s)) && POOL_ADDRESS.test(value.trim())) {
      mining.weak('pool', field, `a pool address ${quote(value.trim())}`);
    }
  }

  const crackingKinds = cracking.weakKinds();
  const modeAndAttackOnly = crackingKinds.size === 2 && crackingKinds.has('hash-mode') && crackingKinds.has('attack-mode');
  const crackingCombines = hashcatCall || (crackingKinds.size >= 2 && !modeAndAttackOnly);
  const rank = (field: string) => {
    const i = input.strings.findIndex((s) => s.field === field);
    return i < 0 ? input.strings.length : i;
  };
  return [...mining.signals(mining.weakKinds().size >= 2, rank), ...cracking.signals(crackingCombines, rank)];
}

function miningOption(option: CommandOption, mining: Collector): void {
  const { name, field } = option;
  const value = option.value ?? '';
  if (XMRIG_OPTIONS.test(name)) mining.strong(field, `the miner option ${name}`);
  else if (ALGO_OPTIONS.has(name) && isMiningAlgorithm(value.toLowerCase())) mining.strong(field, `the mining algorithm ${quote(value)} (${name})`);
  else if (COIN_OPTIONS.has(name) && MINING_COINS.has(value.toLowerCase())) mining.weak('coin', field, `the mining coin ${quote(value)} (${name})`);
  else if (USER_OPTIONS.has(name) && WALLET.test(value)) mining.weak('wallet', field, `a wallet address as ${name}`);
  else if (POOL_OPTIONS.has(name) && POOL_ADDRESS.test(value)) mining.weak('pool', field, `a pool address ${quote(value)} (${name})`);
  else if (MINER_OPTIONS.has(name)) mining.weak(name, field, `the miner option ${name}`);
}

function crackingOption(option: CommandOption, cracking: Collector): void {
  const { name, field } = option;
  const value = option.value ?? '';
  if (HASH_MODE_OPTIONS.has(name) && HASH_MODE.test(value)) cracking.weak('hash-mode', field, `a hash mode (${name} ${value})`);
  else if (ATTACK_MODE_OPTIONS.has(name) && ATTACK_MODE.test(value)) cracking.weak('attack-mode', field, `an attack mode (${name} ${value})`);
  else if (POTFILE_OPTIONS.test(name)) cracking.weak('potfile', field, `the cracker option ${name}`);
  else if (name === '--wordlist' || name === '--wordlists') cracking.weak('wordlist', field, `a wordlist option (${name})`);
  else if (name === '--format' && JOHN_FORMATS.test(value)) cracking.weak('john-format', field, `a password-hash format (${name}=${value})`);
  else if (name === '--incremental') cracking.weak('incremental', field, `the cracker option ${name}`);
}

function isMiningAlgorithm(value: string): boolean {
  return MINING_ALGORITHMS.has(value) || MINING_ALGORITHM_FAMILY.test(value);
}

function isHydraAttack(command: SimpleCommand, options: readonly CommandOption[]): boolean {
  // THC Hydra's targets are `<service>://host` (`ssh://`, `http-post-form://`); plain http(s)
  // URLs are Ory Hydra's `--endpoint`.
  return options.some((o) => HYDRA_LOGIN_OPTIONS.has(o.name)) || command.args.some((w) => /^(?!https?:\/\/)[a-z0-9-]+:\/\/./i.test(w.text));
}

/**
 * True when the command has an operand: a word that is not an option and does not follow one
 * (except hashcat's value-less options), i.e. what would be hashcat's hash file.
 */
function hasOperand(command: SimpleCommand): boolean {
  return command.args.some((word, i) => {
    if (word.text.startsWith('-')) return false;
    const previous = command.args[i - 1]?.text;
    return previous === undefined || !previous.startsWith('-') || previous.includes('=') || HASHCAT_BOOLEAN_OPTIONS.has(previous);
  });
}

/** The distinct host-like tokens of a lower-case string: `stratum+tcp://a.b.org:3333` gives `a.b.org`. */
function hostsIn(lower: string): Set<string> {
  const hosts = new Set<string>();
  for (const token of lower.split(/[^a-z0-9.-]+/)) {
    if (token.includes('.')) hosts.add(token.replace(/^[.-]+|[.-]+$/g, ''));
  }
  return hosts;
}

const poolDomains: ReadonlySet<string> = new Set(MINING_POOL_DOMAINS);

/** True when `host` is a pool domain or a name under one (checked label by label). */
function isUnderPoolDomain(host: string): boolean {
  for (let suffix = host; ; ) {
    if (poolDomains.has(suffix)) return true;
    const dot = suffix.indexOf('.');
    if (dot < 0) return false;
    suffix = suffix.slice(dot + 1);
  }
}

/**
 * Gathers one rule's evidence. Strong evidence becomes one signal each; weak evidence (first of
 * each kind) becomes a single signal on the field where it starts, naming the other fields, and
 * only when the rule has no strong evidence (which already says enough) and the weak evidence
 * combines.
 */
class Collector {
  private readonly strongSignals: Signal[] = [];
  private readonly weakByKind = new Map<string, { field: string; phrase: string }>();

  constructor(private readonly rule: 'mining_signature' | 'cracking_signature') {}

  strong(field: string, phrase: string): void {
    this.strongSignals.push({ rule: this.rule, field, phrase });
  }

  weak(kind: string, field: string, phrase: string): void {
    if (!this.weakByKind.has(kind)) this.weakByKind.set(kind, { field, phrase });
  }

  weakKinds(): ReadonlySet<string> {
    return new Set(this.weakByKind.keys());
  }

  signals(weakCombines: boolean, fieldRank: (field: string) => number): Signal[] {
    if (this.strongSignals.length > 0 || !weakCombines) return this.strongSignals;
    const evidence = [...this.weakByKind.values()].sort((a, b) => fieldRank(a.field) - fieldRank(b.field));
    const field = evidence[0]?.field ?? '';
    const phrase = evidence.map((e) => (e.field === field ? e.phrase : `${e.phrase} in ${e.field}`)).join(', together with ');
    return [{ rule: this.rule, field, phrase }];
  }
}
