import { arrayOf, integer, object, oneOf, text, url } from './rules.js';
import { compileSchema } from './validator.js';

export const DOCUMENT_TYPES = ['website', 'pdf', 'txt', 'docx'] as const;
export type DocumentType = (typeof DOCUMENT_TYPES)[number];
/** Largest uploaded file (spec section 8): 20 MB, documents and lead lists alike. */
export const MAX_UPLOAD_BYTES = 20 * 1024 * 1024;
/** Laravel's words for a file over `max:20480`. */
export const FILE_TOO_LARGE = 'The file may not be greater than 20480 kilobytes.';

export interface KnowledgebaseInput {
  name: string;
  description?: string | null;
}
export const createKnowledgebaseSchema = compileSchema<KnowledgebaseInput>({
  name: text({ max: 255 }),
  description: text({ max: 255, optional: true, nullable: true }),
});
export const updateKnowledgebaseSchema = compileSchema<Partial<KnowledgebaseInput>>({
  name: text({ max: 255, optional: true }),
  description: text({ max: 255, optional: true, nullable: true }),
});

export interface CreateDocumentInput {
  name: string;
  description?: string | null;
  type: DocumentType;
  url?: string;
  links?: Array<{ link: string }>;
  relative_links_limit?: number;
}
export const createDocumentSchema = compileSchema<CreateDocumentInput>({
  name: text({ max: 255 }),
  description: text({ max: 255, optional: true, nullable: true }),
  type: oneOf(DOCUMENT_TYPES),
  url: url({ optional: true, description: 'Main URL to scrape (website, when links is absent)' }),
  links: arrayOf(object({ link: url() }), { optional: true, min: 1, max: 50, description: 'Specific URLs to scrape (website, when url is absent)' }),
  relative_links_limit: integer({ min: 1, max: 50, optional: true, description: 'Relative links followed from url; default 10' }),
});

export interface UpdateDocumentInput {
  name?: string;
  description?: string | null;
}
export const updateDocumentSchema = compileSchema<UpdateDocumentInput>({
  name: text({ max: 255, optional: true }),
  description: text({ max: 255, optional: true, nullable: true }),
});

export interface SearchInput {
  query: string;
  limit?: number;
}
export const searchSchema = compileSchema<SearchInput>({
  query: text({ max: 1000, description: 'A question or keywords' }),
  limit: integer({ optional: true, min: 1, max: 20, description: 'Passages returned; default 5' }),
});
