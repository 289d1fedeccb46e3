-- The transcript of a live call as its process last wrote it with a heartbeat, only when it had
-- changed since (a turn, not every second). A call whose process stopped outright keeps it: the
-- sweep that ends the call writes it to the call. The row goes with the call's end.
ALTER TABLE call_heartbeats ADD COLUMN transcript text;
