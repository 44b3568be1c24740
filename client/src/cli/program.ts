import { Argument, Command, CommanderError, Option } from 'commander';
import { EXIT } from './exit.js';
import { VERSION } from './version.js';

/** What a command module gets: its positional arguments, its own options and the global ones. */
export interface CommandInput {
  args: string[];
  opts: Record<string, unknown>;
  global: Record<string, unknown>;
  /** The root command, for the commands that describe the tree (completion). */
  root: Command;
}

/** A command module: runs and answers its exit code. */
export interface CommandModule {
  run(input: CommandInput): Promise<number>;
}

const EXIT_CODES_HELP = `
Exit codes:
  0  done (for a job: it COMPLETED and its program exited 0)
  1  the job ended FAILED, TIMED_OUT, CANCELED or EXPIRED, or its program exited non-zero
  2  the command line is wrong (unknown option, bad value, missing file)
  3  the API answered an error, or could not be reached
  4  downloaded bytes do not match their recorded SHA-256
  5  the wallet or the chain failed (key file, wrong chain or account, transaction)
  130  Ctrl-C stopped gf run while it waited (the job keeps running)

Configuration: $XDG_CONFIG_HOME/gpufarm/config.toml (default ~/.config/gpufarm/config.toml), written by gf login.
Precedence: --api-key > GF_API_KEY > profile; --endpoint > GF_ENDPOINT > profile > http://127.0.0.1:8080.`;

/**
 * The `gf` command tree. Each action imports its module only when it runs, so building the tree
 * (for `--help`, `--version` and completion) loads nothing but commander.
 */
export function buildProgram(onExit: (code: number) => void): Command {
  const program = new Command('gf');
  program
    .description('The gpufarm command line: rent GPUs by the job.')
    .version(VERSION, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help for a command')
    .option('--endpoint <url>', 'the API address (overrides GF_ENDPOINT and the profile)')
    .option('--api-key <key>', 'the API key (overrides GF_API_KEY and the profile)')
    .option('--profile <name>', 'the config profile to use (GF_PROFILE; default "default")')
    .option('--json', "print the API's JSON only, on stdout")
    .option('--explain', 'print each HTTP call (method, URL, status, request id) to stderr')
    .addHelpText('after', EXIT_CODES_HELP)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();

  const lazy = (load: () => Promise<CommandModule>) =>
    async function (this: Command) {
      const mod = await load();
      onExit(await mod.run({ args: this.args, opts: this.opts(), global: this.optsWithGlobals(), root: program }));
    };

  program
    .command('login')
    .description('verify an API key and store it (with the endpoint) in the config profile')
    .option('--rpc-url <url>', 'also store the chain RPC URL that gf run --fund and gf jobs fund send through')
    .addHelpText('after', '\nWithout --api-key the key is read from stdin (or asked for on a terminal).')
    .action(lazy(() => import('./commands/login.js')));

  program
    .command('whoami')
    .description('show the endpoint, profile and key in use, and check the key')
    .action(lazy(() => import('./commands/whoami.js')));

  program
    .command('capacity')
    .description('list GPU offers with a summary line')
    .option('--model <id>', 'GPU class id, e.g. rtx-4090')
    .option('--region <key>', 'a region key or group')
    .option('--min-vram <gb>', 'minimum VRAM per GPU, GB')
    .option('--max-price <usd>', 'maximum USD per GPU-hour')
    .option('--farm <slug>', 'a farm slug')
    .option('--min-uptime <percent>', 'minimum 30-day uptime percent')
    .option('--workload <type>', 'a workload type')
    .option('--cuda <version>', 'minimum CUDA version')
    .addOption(new Option('--tier <tier>', 'minimum benchmark tier').choices(['S', 'A', 'B', 'C']))
    .addOption(new Option('--sort <order>', 'order of the offers').choices(['available', 'price_asc', 'price_desc', 'vram', 'uptime', 'count']))
    .option('--available', 'only offers with idle GPUs now')
    .option('--proven', 'only machines that proved their GPUs with a GPU challenge')
    .option('--limit <n>', 'offers per page (1-500)')
    .option('--cursor <cursor>', 'start at this page cursor')
    .option('--all', 'walk every page (with --json: one array)')
    .action(lazy(() => import('./commands/capacity.js')));

  program
    .command('pricing')
    .description('show the pricing (fees, minimum billing, tokens)')
    .action(lazy(() => import('./commands/pricing.js')));

  program
    .command('run')
    .description('create a job from a file or a template; with --fund, fund it, wait for it and exit with its outcome')
    .option('-f, --file <path>', 'the job spec, YAML (.yaml/.yml) or JSON; - reads JSON from standard input')
    .option('--template <name>', 'a built-in template or one of yours (gf templates lists them) instead of a file')
    .option('--fund', 'fund the job from the wallet (GF_WALLET_KEY or --wallet-key-file), then wait for it')
    .option('--follow', 'print the logs while the job runs')
    .option('--download <dir>', 'download and verify the output artifacts into this directory')
    .option('--wallet-key-file <path>', 'a file (mode 0600) holding the wallet private key')
    .option('--rpc-url <url>', 'the chain RPC to fund through (overrides GF_RPC_URL and the profile)')
    .option('--idempotency-key <key>', 'the Idempotency-Key of the creation (default: a new one)')
    .option('--detach', 'do not wait for the job after funding it')
    .action(lazy(() => import('./commands/run.js')));

  program
    .command('templates')
    .description('list the job templates: built-in ones and yours (run one with gf run --template NAME)')
    .action(lazy(() => import('./commands/templates.js')));

  const jobs = program.command('jobs').description('list, inspect, fund, wait for and cancel jobs');
  jobs
    .command('list')
    .description('list jobs, newest first')
    .option('--status <list>', 'comma-separated statuses, e.g. RUNNING,QUEUED')
    .option('--limit <n>', 'jobs per page (1-100)')
    .option('--cursor <cursor>', 'start at this page cursor')
    .option('--all', 'walk every page (with --json: one array)')
    .action(lazy(() => import('./commands/jobs-list.js')));
  jobs
    .command('get')
    .description('show one job')
    .argument('<job>', 'the job id')
    .action(lazy(() => import('./commands/jobs-get.js')));
  jobs
    .command('cancel')
    .description('cancel a job that is not running')
    .argument('<job>', 'the job id')
    .option('--reason <text>', 'why, kept with the job')
    .action(lazy(() => import('./commands/jobs-cancel.js')));
  jobs
    .command('fund')
    .description("send a created job's funding calls from the wallet and confirm them")
    .argument('<job>', 'the job id')
    .option('--wallet-key-file <path>', 'a file (mode 0600) holding the wallet private key')
    .option('--rpc-url <url>', 'the chain RPC to fund through (overrides GF_RPC_URL and the profile)')
    .action(lazy(() => import('./commands/jobs-fund.js')));
  jobs
    .command('wait')
    .description('wait until a job ends; exits with its outcome')
    .argument('<job>', 'the job id')
    .option('--timeout <seconds>', 'stop waiting after this long (the job keeps running)')
    .action(lazy(() => import('./commands/jobs-wait.js')));

  program
    .command('logs')
    .description("print a job's log lines")
    .argument('<job>', 'the job id')
    .option('-f, --follow', 'keep printing new lines until the job ends')
    .addOption(new Option('--stream <stream>', 'only this stream').choices(['stdout', 'stderr', 'system']))
    .option('--since <cursor>', 'start after this cursor (a previous nextCursor)')
    .action(lazy(() => import('./commands/logs.js')));

  const artifacts = program.command('artifacts').description('download artifacts');
  artifacts
    .command('get')
    .description('download an artifact and verify its SHA-256')
    .argument('<artifact>', 'the artifact id')
    .option('-o, --output <file>', 'where to write it (default: its file name in the current directory)')
    .action(lazy(() => import('./commands/artifacts-get.js')));

  program
    .command('billing')
    .description('list billing entries')
    .option('--limit <n>', 'entries per page (1-200)')
    .option('--cursor <cursor>', 'start at this page cursor')
    .option('--all', 'walk every page (with --json: one array)')
    .action(lazy(() => import('./commands/billing.js')));

  program
    .command('completion')
    .description('print a shell completion script: source <(gf completion bash)')
    .addArgument(new Argument('<shell>', 'bash or zsh').choices(['bash', 'zsh']))
    .action(lazy(() => import('./commands/completion.js')));

  return program;
}

/** Runs `gf` with `argv` (without node and the script) and answers the exit code. */
export async function runCli(argv: string[]): Promise<number> {
  let code: number = EXIT.ok;
  const program = buildProgram((c) => (code = c));
  try {
    await program.parseAsync(argv, { from: 'user' });
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    const { reportError } = await import('./report.js');
    return reportError(err);
  }
}
