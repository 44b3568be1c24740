-- Roles and sessions (issue 28).

-- Who asked for a machine's drain: an operator (the operator area, or the machine's own
-- `gf-agent drain`) lifts only an operator's drain; an admin lifts any. Drains in place take the
-- kind of their last audited drain, and an admin's when none says otherwise.
ALTER TABLE machines ADD COLUMN drain_set_by text CHECK (drain_set_by IN ('admin', 'operator'));
UPDATE machines m SET drain_set_by = CASE
    WHEN (SELECT a.actor_kind FROM audit_log a
           WHERE a.target_type = 'machine' AND a.target_id = m.id AND a.action = 'machine.drain'
           ORDER BY a.at DESC, a.id DESC LIMIT 1) IN ('operator_wallet', 'machine') THEN 'operator'
    ELSE 'admin' END
  WHERE m.drain_requested;
ALTER TABLE machines ADD CONSTRAINT machines_drain_set_by CHECK (drain_requested = (drain_set_by IS NOT NULL));

-- A sign-in nonce is bound to the browser that asked for it: the SHA-256 of that browser's
-- pre-session cookie. Unbound nonces (five minutes of life at most) are dropped.
DELETE FROM web_nonces;
ALTER TABLE web_nonces ADD COLUMN browser_hash text NOT NULL CHECK (browser_hash ~ '^[0-9a-f]{64}$');

-- The earnings ledger is summed by the database, a page at a time: every settled job carries its
-- fee in token base units. Completions recorded before migration 018 kept only the fee in
-- micro-USD: it is converted as the completion did (stablecoin: scaled to its decimals; ETH: at
-- the job's fixed rate, rounded up).
UPDATE jobs SET settlement_fee = CASE
    WHEN payment_kind = 'stable' THEN fee_micro_usd::numeric * (10::numeric ^ (payment_decimals - 6))
    ELSE ceil(fee_micro_usd::numeric * coalesce(wei_per_usd, 0) / 1000000)
  END
  WHERE settlement_status IS NOT NULL AND settlement_fee IS NULL AND fee_micro_usd IS NOT NULL;
-- A page of keys starts after the last key of the previous one.
CREATE INDEX api_keys_account_created ON api_keys (account_id, created_at DESC, id DESC);
