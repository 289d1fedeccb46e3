-- Users, their bearer tokens (sessions and API keys) and the balance ledger.

CREATE TABLE users (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name          text NOT NULL,
  email         text NOT NULL,
  password_hash text NOT NULL,
  plan          text NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'pro')),
  balance       numeric(18, 6) NOT NULL DEFAULT 0 CONSTRAINT users_balance_not_negative CHECK (balance >= 0),
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- Bearer tokens, stored only as SHA-256 digests. `expires_at` is null for API keys.
CREATE TABLE access_tokens (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  kind         text NOT NULL CHECK (kind IN ('api_key', 'session')),
  name         text NOT NULL,
  token_digest bytea NOT NULL,
  last_used_at timestamptz,
  expires_at   timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX access_tokens_digest_key ON access_tokens (token_digest);
CREATE INDEX access_tokens_user_kind ON access_tokens (user_id, kind, id);

-- Every balance change is a ledger row; inserting the row is the only way to move the balance.
-- `reference` makes a charge idempotent per kind (one row per conversation message, per call).
CREATE TABLE ledger_entries (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  amount        numeric(18, 6) NOT NULL CHECK (amount <> 0),
  balance_after numeric(18, 6) NOT NULL,
  kind          text NOT NULL,
  reason        text,
  reference     text,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_user ON ledger_entries (user_id, id);
CREATE UNIQUE INDEX ledger_entries_reference_key ON ledger_entries (kind, reference) WHERE reference IS NOT NULL;

-- Applies a ledger row to the cached balance in the same statement; the users CHECK refuses a
-- negative result, which aborts the insert too. So the cache and the ledger cannot disagree.
CREATE FUNCTION ledger_entries_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE users SET balance = balance + NEW.amount WHERE id = NEW.user_id RETURNING balance INTO NEW.balance_after;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'user % does not exist', NEW.user_id USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER ledger_entries_apply BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION ledger_entries_apply();

CREATE FUNCTION ledger_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ledger entries are append-only' USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE ON ledger_entries FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only();

-- The balance column moves only through a ledger row (trigger depth 2: ledger -> users).
CREATE FUNCTION users_balance_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.balance IS DISTINCT FROM OLD.balance AND pg_trigger_depth() < 2 THEN
    RAISE EXCEPTION 'users.balance changes only through ledger_entries' USING ERRCODE = 'restrict_violation';
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER users_balance_guard BEFORE UPDATE OF balance ON users FOR EACH ROW EXECUTE FUNCTION users_balance_guard();
