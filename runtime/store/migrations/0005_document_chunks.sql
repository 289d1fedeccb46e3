-- Searchable chunks of ingested documents: full text (tsvector, language-aware) and an embedding.
-- Rows go with their document (cascade), so deleting a document removes its index entries in the
-- same statement.

CREATE TABLE document_chunks (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  document_id      bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
  knowledgebase_id bigint NOT NULL,
  user_id          bigint NOT NULL,
  chunk_index      integer NOT NULL,
  content          text NOT NULL,
  source           text,
  ts_config        regconfig NOT NULL,
  tsv              tsvector NOT NULL,
  embedding        real[] NOT NULL,
  embedding_model  text NOT NULL,
  UNIQUE (document_id, chunk_index)
);
CREATE INDEX document_chunks_tsv ON document_chunks USING gin (tsv);
CREATE INDEX document_chunks_knowledgebase ON document_chunks (knowledgebase_id, user_id);
