-- When each periodic sweep (left calls, pending evaluations, phone-number renewals, unanswered
-- messages) is next due, shared by every process on this database: the process that moves
-- `next_at` on runs that period's sweep, the others skip it.
CREATE TABLE sweeps (
  name text PRIMARY KEY,
  next_at timestamptz NOT NULL
);
