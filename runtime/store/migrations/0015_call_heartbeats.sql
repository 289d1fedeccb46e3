-- The process holding a live call vouches for it every second or so: when it did last (seen_at)
-- and when the call's audio last went either way (heard_at, by that process's clock). A narrow
-- table of its own, so the heartbeat is a HOT update of a few bytes instead of a new version of
-- the call's row and of its indexes. A call whose process stopped is ended by another process's
-- sweep (or the next start) and charged up to heard_at. The row goes with the call's end.
CREATE TABLE call_heartbeats (
  call_id  bigint PRIMARY KEY REFERENCES calls (id) ON DELETE CASCADE,
  seen_at  timestamptz NOT NULL,
  heard_at timestamptz
) WITH (fillfactor = 70);
