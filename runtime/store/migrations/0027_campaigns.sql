-- Outbound campaigns: an owner's leads dialled by an assistant inside a weekly window, a few at a
-- time, with retries. Any process dials: the dialler locks a running campaign's row (SKIP LOCKED),
-- counts its leads being called, and claims due leads in the same transaction, so the campaigns'
-- concurrency holds across processes. A claimed lead is `calling` under a lease until its call's
-- row exists (calls.campaign_lead_id, unique with the attempt: an attempt is dialled once at
-- most), then follows that call's end.
ALTER TABLE campaigns
  ADD COLUMN assistant_id           bigint REFERENCES assistants (id) ON DELETE SET NULL,
  ADD COLUMN status                 text NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'running', 'paused', 'completed', 'cancelled')),
  ADD COLUMN status_reason          text,
  -- {timezone, days: ["mon".."sun"], start_time "HH:MM", end_time "HH:MM"}
  ADD COLUMN schedule               jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN max_concurrent_calls   integer NOT NULL DEFAULT 5 CHECK (max_concurrent_calls BETWEEN 1 AND 100),
  ADD COLUMN max_attempts           integer NOT NULL DEFAULT 3 CHECK (max_attempts BETWEEN 1 AND 10),
  ADD COLUMN retry_interval_minutes integer NOT NULL DEFAULT 60 CHECK (retry_interval_minutes BETWEEN 1 AND 10080),
  ADD COLUMN retry_on               text[] NOT NULL DEFAULT '{no-answer,busy}',
  ADD COLUMN variables              jsonb NOT NULL DEFAULT '{}';
CREATE INDEX campaigns_running ON campaigns (id) WHERE status = 'running';
CREATE INDEX campaigns_user_status ON campaigns (user_id, status, id);
CREATE INDEX campaigns_assistant ON campaigns (assistant_id) WHERE assistant_id IS NOT NULL;

CREATE TABLE campaign_leads (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  campaign_id     bigint NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
  user_id         bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  phone_number    text NOT NULL,
  variables       jsonb NOT NULL DEFAULT '{}',
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'calling', 'completed', 'retrying', 'failed', 'no-answer', 'busy', 'voicemail', 'cancelled', 'do-not-call')),
  attempts        integer NOT NULL DEFAULT 0,
  last_call_id    bigint REFERENCES calls (id) ON DELETE SET NULL,
  -- When a pending or retrying lead may be dialled next (its window permitting).
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  -- The process that claimed a `calling` lead, and until when its claim stands without a call row.
  lease_holder    text,
  lease_until     timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (campaign_id, phone_number)
);
CREATE INDEX campaign_leads_listing ON campaign_leads (campaign_id, id);
CREATE INDEX campaign_leads_status ON campaign_leads (campaign_id, status, id);
CREATE INDEX campaign_leads_due ON campaign_leads (campaign_id, next_attempt_at, id) WHERE status IN ('pending', 'retrying');
CREATE INDEX campaign_leads_calling ON campaign_leads (campaign_id) WHERE status = 'calling';
CREATE INDEX campaign_leads_user_number ON campaign_leads (user_id, phone_number) WHERE status IN ('pending', 'retrying');

ALTER TABLE calls
  ADD COLUMN campaign_lead_id bigint REFERENCES campaign_leads (id) ON DELETE SET NULL,
  ADD COLUMN campaign_attempt integer;
CREATE UNIQUE INDEX calls_campaign_attempt ON calls (campaign_lead_id, campaign_attempt) WHERE campaign_lead_id IS NOT NULL;

-- Numbers an owner's campaigns never dial.
CREATE TABLE do_not_call (
  user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  phone_number text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, phone_number)
);

-- Each owner's dialling pace, shared by every process: a token bucket refilled at the configured
-- calls per second, taken from under the row's lock in the claim's transaction.
CREATE TABLE campaign_pacing (
  user_id    bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
  allowance  double precision NOT NULL,
  refilled_at timestamptz NOT NULL
);
