-- A conversation's turn in progress, whichever process runs it: another process waits for the
-- turn to end (or for this lease to lapse, if its process stopped) before starting the next one.
ALTER TABLE conversations ADD COLUMN turn_until timestamptz;
