-- What live calls have reserved of their owners' balances, so that processes sharing one balance
-- never together spend more than it. A call holds the whole of what it may cost up to a little
-- ahead (what it has cost so far and its next stretch); its process raises the hold and pushes
-- its expiry on every few seconds. What an owner can still spend elsewhere (another call, a
-- message) is the balance less every unexpired hold. Writers of holds lock the owner's users row
-- first, as every ledger entry does, so they see each other's commits. The hold goes in the
-- transaction that charges the call's end (or the sweep's, for a call whose process died); a
-- hold nobody renews lapses at expires_at, by when its call's own meter has ended it.
CREATE TABLE balance_holds (
  call_id    bigint PRIMARY KEY REFERENCES calls (id) ON DELETE CASCADE,
  user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  amount     numeric(18, 6) NOT NULL CHECK (amount >= 0),
  expires_at timestamptz NOT NULL
) WITH (fillfactor = 70);

-- Neither amount nor expires_at is indexed, so a renewal is a HOT update of the row alone.
CREATE INDEX balance_holds_user ON balance_holds (user_id);
