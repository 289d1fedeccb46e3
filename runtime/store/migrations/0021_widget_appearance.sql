-- The chat widget's default look per assistant (title, colours, avatar, position, greeting), as
-- the API validated it; NULL: the platform's defaults. The script tag's data-* attributes override it.
ALTER TABLE assistants ADD COLUMN widget jsonb;
