-- Calls without an end, by when a process last vouched for them (live calls are touched every
-- 30 s): what the orphan sweep looks for.
CREATE INDEX calls_open ON calls (updated_at) WHERE ended_at IS NULL;
