-- Rented numbers are paid a month at a time: `paid_until` is the end of the paid month. A renewal
-- sweep charges the next month when it comes; a number whose owner cannot pay lapses
-- (has_active_subscription false, no inbound calls) and is renewed when the balance allows, within
-- 30 days.
ALTER TABLE phone_numbers ADD COLUMN paid_until timestamptz;
UPDATE phone_numbers SET paid_until = created_at + interval '1 month' WHERE has_active_subscription AND monthly_price > 0 AND type <> 'caller_id';
CREATE INDEX phone_numbers_renewal ON phone_numbers (paid_until) WHERE paid_until IS NOT NULL;
