-- A conversation's turn in progress, whichever process runs it: another process waits for the
-- turn to end (or for this lease to lapse, if its process stopped) before starting the next one.
-- Only the turn's owner renews or ends the lease.
ALTER TABLE conversations ADD COLUMN turn_until timestamptz, ADD COLUMN turn_owner uuid;
