import { GfError } from '../errors.js';
import { EXIT, UsageError, WalletError } from './exit.js';

/** What to do next after each error code, for the line under the message. */
const NEXT_STEP: Partial<Record<string, string>> = {
  missing_api_key: 'Run `gf login`, or set GF_API_KEY, or pass --api-key.',
  invalid_api_key: 'Check the key (gf whoami shows which one is in use) and run `gf login` with a valid one.',
  revoked_api_key: 'Create a new key in the dashboard and run `gf login`.',
  wrong_environment: 'Use a key made for this deployment (gf_test_ on test chains, gf_live_ on mainnet).',
  insufficient_scope: 'Create a key with the scope this command needs in the dashboard.',
  account_suspended: 'Contact support about the account.',
  not_found: 'Check the id (gf jobs list shows your jobs).',
  forbidden: 'Use the key of the account that owns it.',
  validation_error: 'Fix the fields listed above in the job file and run again.',
  policy_rejected: 'Change the job so the workload policy allows it (see the details above).',
  invalid_request: 'Fix the parameter named above.',
  invalid_json: 'Fix the JSON of the request.',
  payload_too_large: 'Keep the job spec under 256 KiB; upload large inputs as artifacts.',
  conflict: 'Check the job status (gf jobs get ID); an Idempotency-Key is bound to its first body.',
  gone: 'The artifact expired; run the job again to produce it.',
  rate_limited: 'Wait a minute and try again.',
  internal: 'Try again; if it persists, report it with the request id.',
  unavailable: 'The service or its chain is unavailable; try again later.',
  network_error: 'Check the endpoint (--endpoint, GF_ENDPOINT or gf login) and that the service is up.',
  timeout: 'Try again later, or wait longer (the job keeps running).',
  invalid_response: 'The client and the server may be of different versions; update gf.',
  integrity_error: 'Download it again; if it persists, report it with the artifact id.',
  wallet_mismatch: "Fund from the wallet of the account that owns the API key (funding.signer).",
  wrong_chain: "Use a wallet on the deployment's chain (gf whoami shows it).",
};

/** The exit code of a failure: 4 for integrity, 5 for wallet and chain, 2 for usage, else 3. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError) return EXIT.usage;
  if (err instanceof WalletError) return EXIT.wallet;
  if (err instanceof GfError) {
    if (err.code === 'integrity_error') return EXIT.integrity;
    if (err.code === 'wallet_mismatch' || err.code === 'wrong_chain') return EXIT.wallet;
    return EXIT.api;
  }
  return EXIT.api;
}

/** Prints a failure to stderr (code, message, details, request id, what to do next) and answers its exit code. */
export function reportError(err: unknown): number {
  const lines: string[] = [];
  if (err instanceof GfError) {
    // A failure found in a successful answer (integrity) shows no status; an error answer does.
    const status = err.status !== null && err.status >= 300 ? ` (HTTP ${err.status})` : '';
    lines.push(`gf: ${err.code}${status}: ${err.message}`);
    // Detail messages name their field themselves.
    for (const d of err.details) lines.push(`  ${d.message}`);
    if (err.requestId) lines.push(`  request id: ${err.requestId}`);
    const next = NEXT_STEP[err.code];
    if (next) lines.push(`  next: ${next}`);
  } else if (err instanceof UsageError || err instanceof WalletError) {
    lines.push(`gf: ${err instanceof UsageError ? 'usage' : 'wallet'}: ${err.message}`);
    if (err.hint) lines.push(`  next: ${err.hint}`);
  } else {
    lines.push(`gf: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    lines.push('  next: report this with the command you ran.');
  }
  process.stderr.write(`${lines.join('\n')}\n`);
  return exitCodeOf(err);
}
