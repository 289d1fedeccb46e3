-- Owned phone numbers and the inventory of purchasable ones.

CREATE TABLE phone_numbers (
  id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  user_id                 bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  phone_number            text NOT NULL,
  country_code            text NOT NULL,
  type                    text NOT NULL CHECK (type IN ('normal', 'sip', 'caller_id')),
  sms_capable             boolean NOT NULL DEFAULT false,
  region                  text NOT NULL DEFAULT '',
  has_active_subscription boolean NOT NULL DEFAULT false,
  monthly_price           numeric(18, 6) NOT NULL DEFAULT 0,
  created_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX phone_numbers_user ON phone_numbers (user_id, id);
-- A rented number has one owner; a caller ID may be verified by several accounts.
CREATE UNIQUE INDEX phone_numbers_rented_key ON phone_numbers (phone_number) WHERE type <> 'caller_id';
CREATE UNIQUE INDEX phone_numbers_user_number_key ON phone_numbers (user_id, phone_number);

CREATE TABLE phone_number_inventory (
  phone_number           text PRIMARY KEY,
  phone_number_formatted text NOT NULL,
  country_code           text NOT NULL,
  region                 text NOT NULL,
  price                  numeric(18, 6) NOT NULL,
  billing_price_id       text NOT NULL,
  address_requirements   text NOT NULL CHECK (address_requirements IN ('none', 'local', 'foreign', 'inventory')),
  sms_capable            boolean NOT NULL
);
CREATE INDEX phone_number_inventory_country ON phone_number_inventory (country_code, phone_number);

-- Twenty numbers per supported country, from ranges reserved for fiction and testing where the
-- regulator has one, so seeded numbers never ring a real subscriber.
INSERT INTO phone_number_inventory (phone_number, phone_number_formatted, country_code, region, price, billing_price_id, address_requirements, sms_capable)
SELECT n.e164, n.formatted, c.country, c.region, c.price, 'price_' || lower(c.country) || '_local_monthly', c.address, c.sms
FROM (VALUES
  ('US', 'San Francisco, CA', '415', 1.15, 'none', true),
  ('US', 'New York, NY', '212', 1.15, 'none', true),
  ('CA', 'Toronto, ON', '416', 1.30, 'none', true),
  ('GB', 'London', '20', 1.50, 'local', false),
  ('AU', 'Sydney, NSW', '2', 3.00, 'local', false),
  ('IL', 'Tel Aviv', '3', 4.00, 'foreign', false),
  ('PL', 'Warsaw', '22', 2.50, 'local', false),
  ('FI', 'Helsinki', '9', 3.00, 'none', false),
  ('NL', 'Amsterdam', '20', 2.00, 'local', false),
  ('DK', 'Copenhagen', '32', 3.50, 'none', false),
  ('IT', 'Rome', '06', 2.80, 'local', false)
) AS c (country, region, area, price, address, sms)
CROSS JOIN generate_series(0, 19) AS s (i)
CROSS JOIN LATERAL (
  SELECT
    CASE c.country
      WHEN 'US' THEN '+1' || c.area || '5550' || lpad((100 + s.i)::text, 3, '0')
      WHEN 'CA' THEN '+1' || c.area || '5550' || lpad((150 + s.i)::text, 3, '0')
      WHEN 'GB' THEN '+44' || c.area || '7946' || lpad((100 + s.i)::text, 4, '0')
      WHEN 'AU' THEN '+61' || c.area || '5550' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'IL' THEN '+972' || c.area || '555' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'PL' THEN '+48' || c.area || '555' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'FI' THEN '+358' || c.area || '555' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'NL' THEN '+31' || c.area || '555' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'DK' THEN '+45' || c.area || '55' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'IT' THEN '+39' || c.area || '555' || lpad((1000 + s.i)::text, 4, '0')
    END AS e164,
    CASE c.country
      WHEN 'US' THEN '(' || c.area || ') 555-0' || lpad((100 + s.i)::text, 3, '0')
      WHEN 'CA' THEN '(' || c.area || ') 555-0' || lpad((150 + s.i)::text, 3, '0')
      WHEN 'GB' THEN '+44 ' || c.area || ' 7946 ' || lpad((100 + s.i)::text, 4, '0')
      WHEN 'AU' THEN '+61 ' || c.area || ' 5550 ' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'IL' THEN '+972 ' || c.area || '-555-' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'PL' THEN '+48 ' || c.area || ' 555 ' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'FI' THEN '+358 ' || c.area || ' 555 ' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'NL' THEN '+31 ' || c.area || ' 555 ' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'DK' THEN '+45 ' || c.area || ' 55 ' || lpad((1000 + s.i)::text, 4, '0')
      WHEN 'IT' THEN '+39 ' || c.area || ' 555 ' || lpad((1000 + s.i)::text, 4, '0')
    END AS formatted
) AS n;
