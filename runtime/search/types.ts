import type { DatabaseTransactionConnection } from 'slonik';

/**
 * The search index behind knowledge retrieval (and, later, call transcripts). Two implementations
 * pass one contract suite: PostgreSQL (the default) and Elasticsearch.
 */

export interface IndexedChunk {
  readonly index: number;
  readonly content: string;
  /** `page 3`, a URL, or null. */
  readonly source: string | null;
  /** L2-normalised. */
  readonly embedding: Float32Array;
}

export interface IndexedDocument {
  readonly userId: number;
  readonly knowledgebaseId: number;
  readonly documentId: number;
  /** ISO 639-1 of the knowledgebase's language, or undefined for language-neutral analysis. */
  readonly language: string | undefined;
  /** Vectors of different models are never compared. */
  readonly embeddingModel: string;
}

export interface SearchRequest {
  readonly userId: number;
  readonly knowledgebaseId: number;
  readonly text: string;
  readonly embedding: Float32Array;
  readonly embeddingModel: string;
  readonly language: string | undefined;
  readonly limit: number;
}

export interface SearchHit {
  readonly documentId: number;
  readonly content: string;
  readonly source: string | null;
  /** Reciprocal-rank-fusion score of the text and vector rankings; higher is better. */
  readonly score: number;
}

/** A call as the transcript search sees it (indexed when the call ends). */
export interface IndexedCall {
  readonly id: number;
  readonly userId: number;
  readonly assistantId: number | null;
  readonly campaignId: number | null;
  readonly status: string;
  readonly type: string;
  readonly clientPhoneNumber: string | null;
  /** `<iso_timestamp>` */
  readonly createdAt: string;
  readonly transcript: string;
}

export interface CallSearchFilters {
  readonly status?: string;
  readonly type?: string;
  readonly phoneNumber?: string;
  readonly assistantId?: number;
  readonly campaignId?: number;
  /** Inclusive UTC days, YYYY-MM-DD. */
  readonly dateFrom?: string;
  readonly dateTo?: string;
}

/** Newest first; `after` (the last call of the previous page) pages without offsets at any depth. */
export interface CallSearchRequest {
  readonly userId: number;
  readonly text: string;
  readonly filters: CallSearchFilters;
  readonly size: number;
  /** Offset, for numbered pages (ignored with `after`). */
  readonly from: number;
  readonly after?: { readonly createdAt: string; readonly id: number };
}

export interface CallSearchResult {
  readonly ids: number[];
  readonly total: number;
  /** Sort values of the last hit, for the next `after`. */
  readonly last: { readonly createdAt: string; readonly id: number } | undefined;
}

export interface SearchIndex {
  readonly name: 'postgres' | 'elasticsearch';
  /** Creates what the index needs (templates, mappings); safe to call at every start. */
  prepare(): Promise<void>;
  /**
   * Replaces every chunk of the document. Given `within` (a transaction), the PostgreSQL index
   * writes in it, so the chunks commit (or not) with what else it writes; an index outside
   * PostgreSQL writes at once (the caller holds whatever row locks keep the write its own).
   */
  replaceDocument(document: IndexedDocument, chunks: readonly IndexedChunk[], within?: DatabaseTransactionConnection): Promise<void>;
  deleteDocument(userId: number, documentId: number): Promise<void>;
  deleteKnowledgebase(userId: number, knowledgebaseId: number): Promise<void>;
  search(request: SearchRequest): Promise<SearchHit[]>;
  /** Makes an ended call's transcript searchable. */
  indexCall(call: IndexedCall): Promise<void>;
  /** Full-text search over transcripts with the listing's filters applied inside the query. */
  searchCalls(request: CallSearchRequest): Promise<CallSearchResult>;
}

/** Text-search configuration (PostgreSQL) / analyzer (Elasticsearch) per ISO 639-1 language. */
export const LANGUAGE_ANALYZERS: Readonly<Record<string, string>> = {
  en: 'english',
  de: 'german',
  fr: 'french',
  es: 'spanish',
  it: 'italian',
  pt: 'portuguese',
  nl: 'dutch',
  fi: 'finnish',
  da: 'danish',
  sv: 'swedish',
  no: 'norwegian',
  ru: 'russian',
  tr: 'turkish',
  el: 'greek',
  ro: 'romanian',
  ar: 'arabic',
  hi: 'hindi',
};

/** Ranks fused by reciprocal rank (k = 60), as both engines do. */
export const RRF_K = 60;
/** Candidates taken from each ranking before fusion. */
export const RRF_WINDOW = 50;
