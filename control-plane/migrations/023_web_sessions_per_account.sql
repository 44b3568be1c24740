-- A sign-in counts the account's unexpired sessions and ends the oldest past GF_SESSIONS_PER_ACCOUNT
-- (auth/session-store.ts): without this index each sign-in would read every session of every account.
CREATE INDEX web_sessions_account ON web_sessions (account_id, created_at);
