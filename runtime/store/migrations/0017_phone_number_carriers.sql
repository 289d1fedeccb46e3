-- The carrier a number is rented from (and its calls run through): twilio, telnyx, plivo, vonage.
-- Numbers so far were Twilio's.
ALTER TABLE phone_numbers ADD COLUMN carrier text NOT NULL DEFAULT 'twilio';
