-- Post-call evaluation runs after the call ends; until it is done the call's webhook waits for
-- it (at most ten minutes), and a restart finds the calls still to evaluate here.
ALTER TABLE calls ADD COLUMN evaluation_status text CHECK (evaluation_status IN ('pending', 'done', 'failed'));
CREATE INDEX calls_evaluation_pending ON calls (id) WHERE evaluation_status = 'pending';

-- Transcript search in PostgreSQL (the default search index): a language-neutral text vector,
-- kept up to date by PostgreSQL itself, searched through a GIN index with the user's id.
ALTER TABLE calls ADD COLUMN transcript_search tsvector GENERATED ALWAYS AS (to_tsvector('simple', transcript)) STORED;
CREATE INDEX calls_transcript_search ON calls USING gin (transcript_search);
