-- The customer dashboard signs in with Sign-In with Ethereum: the server issues single-use nonces
-- (deleted on first use, expired ones swept), and a signed-in browser holds a session cookie whose
-- SHA-256 is the session's id here (the cookie value itself is never stored).
CREATE TABLE web_nonces (
  nonce text PRIMARY KEY,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX web_nonces_expires_at ON web_nonces (expires_at);

CREATE TABLE web_sessions (
  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{64}$'),
  account_id text NOT NULL REFERENCES accounts (id),
  wallet_address text NOT NULL CHECK (wallet_address ~ '^0x[0-9a-f]{40}$'),
  chain_id integer NOT NULL,
  csrf_token text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  expires_at timestamptz NOT NULL
);
CREATE INDEX web_sessions_expires_at ON web_sessions (expires_at);

-- Kept by the API-key check, at most once a minute per key, for the dashboard's key list.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

-- A job created from the dashboard is created by the session, not by a key.
ALTER TABLE jobs ALTER COLUMN api_key_id DROP NOT NULL;
