-- An uploaded document file's bytes, kept from the transaction that creates the document until
-- its ingestion ends (ingested, or failed for good), so whichever process claims the document's
-- job reads them: no process's disk holds a file another process needs. Stored out of line and
-- uncompressed (EXTERNAL): the rows are short-lived and most files (PDF, DOCX) are compressed already.
CREATE TABLE document_uploads (
  document_id bigint PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
  bytes       bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE document_uploads ALTER COLUMN bytes SET STORAGE EXTERNAL;

-- Keys every process on this database shares (the one that signs recording links), each made
-- once by whichever process needs it first. Never short.
CREATE TABLE platform_secrets (
  name       text PRIMARY KEY,
  value      bytea NOT NULL CHECK (octet_length(value) >= 32),
  created_at timestamptz NOT NULL DEFAULT now()
);
