/**
 * Exit codes of `gf`: 0 done, 1 the job ended without completing, 2 the command line is wrong,
 * 3 the API (or the network to it) failed, 4 downloaded bytes failed their recorded hash,
 * 5 the wallet or the chain failed; 130 (the shell's code for Ctrl-C) when the user stopped a wait.
 */
export const EXIT = { ok: 0, jobFailed: 1, usage: 2, api: 3, integrity: 4, wallet: 5, interrupted: 130 } as const;
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** A command line that cannot run as written; exits 2 with `hint` as what to do next. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** A wallet or chain failure outside the API (a key file, a transaction); exits 5. */
export class WalletError extends Error {
  constructor(
    message: string,
    readonly hint?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'WalletError';
  }
}
