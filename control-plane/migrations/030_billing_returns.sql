-- Release entries carried 0 micro-USD and the provider's payout: they now carry what the release
-- sent back to the customer's wallet (the deposit less the final payout). A dispute whose outcome
-- lowered the payout recorded at completion gets the `credit` entry that lowers the charge.
WITH settled AS (
  SELECT r.id AS release_id, r.account_id, r.job_id, r.token, r.tx_hash, r.created_at,
         j.max_cost_micro_usd, j.max_payment, coalesce(j.settlement_amount, 0) AS payout,
         c.amount_micro_usd AS charged_micro, coalesce(c.amount, j.settlement_amount, 0) AS charged_units
    FROM billing_entries r
    JOIN jobs j ON j.id = r.job_id
    LEFT JOIN LATERAL (
      SELECT amount_micro_usd, amount FROM billing_entries
       WHERE job_id = r.job_id AND type = 'charge' ORDER BY seq LIMIT 1
    ) c ON true
   WHERE r.type = 'release'
), finals AS (
  SELECT *,
         CASE WHEN charged_micro IS NULL THEN 0
              WHEN payout >= charged_units THEN charged_micro
              WHEN charged_units = 0 THEN 0
              ELSE floor(charged_micro * payout / charged_units)::bigint END AS final_micro
    FROM settled
), credits AS (
  INSERT INTO billing_entries (id, account_id, type, job_id, amount_micro_usd, token, amount, tx_hash, created_at)
  SELECT release_id || '_credit', account_id, 'credit', job_id, charged_micro - final_micro, token, charged_units - payout, tx_hash, created_at
    FROM finals
   WHERE charged_micro IS NOT NULL AND charged_micro > final_micro
  RETURNING id
)
UPDATE billing_entries b
   SET amount_micro_usd = greatest(f.max_cost_micro_usd - f.final_micro, 0),
       amount = greatest(f.max_payment::numeric - f.payout, 0)
  FROM finals f
 WHERE b.id = f.release_id;
