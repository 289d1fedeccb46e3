-- Which process holds a live call, and how its media stream joins it from any process.
-- `holder`: the process instance (a random id per start) that runs the call's session; it alone
-- may write the call's status and end, and it vouches for the call with heartbeats. A call is held
-- by the process that created it until its media stream joins, and from then on by the process
-- that accepted the stream (which may be another one: it takes the call over with the token).
-- `stream_token_hashes`: the SHA-256 of the one-time token the media stream presents, one more for
-- each answer to a repeat of the carrier's webhook (whichever answer the carrier follows works);
-- all cleared when a stream joins (one use). `stream_expires_at`: the tokens are refused after it. `carrier_name`: the carrier the call's number records (null for
-- web calls), whose webhooks and callbacks speak for the call.
ALTER TABLE calls
  ADD COLUMN holder uuid,
  ADD COLUMN carrier_name text,
  ADD COLUMN stream_token_hashes bytea[],
  ADD COLUMN stream_expires_at timestamptz;

-- Requests to the process holding a live call, made on any process: a hang-up by its owner, or a
-- carrier's status callback that landed elsewhere. Taken in order by the holder when notified on
-- channel `call_commands` (payload: the call id) or, should the notification be lost, at its next
-- heartbeat. The rows go with the call's end.
DROP TABLE call_commands;
CREATE TABLE call_commands (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  call_id      bigint NOT NULL REFERENCES calls (id) ON DELETE CASCADE,
  command      text NOT NULL CHECK (command IN ('hangup', 'status')),
  data         jsonb NOT NULL DEFAULT '{}',
  requested_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX call_commands_call ON call_commands (call_id);
