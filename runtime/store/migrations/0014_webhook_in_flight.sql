-- Deliveries in flight by user: the worker leaves a user's other deliveries while one is being
-- attempted, so a receiver that hangs holds up one loop, not all of them.
CREATE INDEX webhook_deliveries_in_flight ON webhook_deliveries (user_id) WHERE status = 'delivering';
