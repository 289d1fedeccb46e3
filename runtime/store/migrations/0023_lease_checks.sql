-- Each claim of a webhook delivery's attempt gets an id of its own, as document jobs' claims do
-- (0016): an attempt's outcome is recorded only while the delivery still carries its claim, so an
-- attempt whose lease ran out (and was taken over by another process, or given up, or redelivered)
-- records nothing over the newer one's.
ALTER TABLE webhook_deliveries ADD COLUMN claim uuid;

-- A post-call evaluation is claimed like a job: an id and a lease, renewed while the model reads
-- the transcript. Its result is saved only under its claim; a pending evaluation whose lease ran
-- out (or that nobody claimed) is taken up by any process's sweep.
ALTER TABLE calls ADD COLUMN evaluation_claim uuid, ADD COLUMN evaluation_lease_expires_at timestamptz;
