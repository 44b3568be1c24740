-- Who may run a farm from the operator area: its payout wallet always, and the wallets listed here
-- (staff who manage machines without holding the payout key).
CREATE TABLE farm_operators (
  farm_id text NOT NULL REFERENCES farms (id) ON DELETE CASCADE,
  wallet_address text NOT NULL CHECK (wallet_address ~ '^0x[0-9a-f]{40}$'),
  added_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (farm_id, wallet_address)
);
CREATE INDEX farm_operators_wallet ON farm_operators (wallet_address);
CREATE INDEX farms_payout_address ON farms (payout_address);
