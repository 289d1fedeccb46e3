-- Each claim of a document job gets an id of its own. A run is the job's owner only while the job
-- carries its claim: a run whose lease lapsed, or whose job was given back at a stop and claimed
-- again, records nothing and renews nothing, whatever the attempt count says.
ALTER TABLE document_jobs ADD COLUMN claim uuid;
