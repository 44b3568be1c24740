import { z } from 'zod';
import type { SettingDoc } from './setting-docs.js';

/** A `gf` profile's name (`--profile`, `GF_PROFILE`, a table of the config file). */
export const profileNameSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'a profile name is 1-64 letters, digits, "_" or "-"');

/**
 * Every environment variable `gf` reads (client/src/cli), each checked here; `npm run demo`
 * reads `GF_ENDPOINT` and `GF_API_KEY` the same way. `CLIENT_SETTING_DOCS` says what each means;
 * `npm run docs` writes both into docs/customers/gf.md.
 */
export const clientSettingsSchema = z.object({
  GF_ENDPOINT: z.url().optional(),
  GF_API_KEY: z.string().min(1).optional(),
  GF_PROFILE: profileNameSchema.optional(),
  GF_RPC_URL: z.url().optional(),
  // Checked where it is used (client/src/cli/wallet.ts), whose message never shows the key.
  GF_WALLET_KEY: z.string().min(1).optional(),
});

export const CLIENT_SETTING_DOCS: Record<keyof z.input<typeof clientSettingsSchema>, SettingDoc> = {
  GF_ENDPOINT: { default: 'unset (the profile\'s `endpoint`, else `http://127.0.0.1:8080`)', description: 'the control plane\'s URL; `--endpoint` wins over it, it over the profile' },
  GF_API_KEY: { default: 'unset (the profile\'s `api_key`)', description: 'the API key (`gf_test_…`, `gf_live_…`); `--api-key` wins over it, it over the profile' },
  GF_PROFILE: { default: 'unset (`default`)', description: 'the profile of the config file to use; `--profile` wins over it' },
  GF_RPC_URL: { default: 'unset (the profile\'s `rpc_url`)', description: 'the chain\'s JSON-RPC URL that `--fund` sends the wallet\'s transactions to; `--rpc-url` wins over it' },
  GF_WALLET_KEY: { description: 'the funding wallet\'s private key (0x and 64 hex digits), when `--wallet-key-file` is not given; never printed' },
};
