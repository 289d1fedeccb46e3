-- What happened in a call, in order (turns, interruptions, tool calls, latencies, statuses, its
-- start and end), for its owner. Written in batches by the process holding the call (with its
-- heartbeat, and the rest with its end), never per audio frame; `seq` numbers a call's events in
-- the order they happened, so a batch written twice (a heartbeat and the end racing) is kept once.
-- `offset_ms` counts from the call's start (its creation).
CREATE TABLE call_events (
  call_id   bigint NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
  seq       integer NOT NULL,
  type      text NOT NULL,
  at        timestamptz NOT NULL,
  offset_ms integer NOT NULL,
  data      jsonb NOT NULL DEFAULT '{}',
  PRIMARY KEY (call_id, seq)
);

-- Requests to the process holding a live call (its owner hanging it up from any process): a row
-- per call, taken by the holder when notified on channel `call_commands` (payload: the call id) or,
-- should the notification be lost, at its next heartbeat. The row goes with the call.
CREATE TABLE call_commands (
  call_id      bigint PRIMARY KEY REFERENCES calls (id) ON DELETE CASCADE,
  command      text NOT NULL CHECK (command IN ('hangup')),
  requested_at timestamptz NOT NULL DEFAULT now()
);
