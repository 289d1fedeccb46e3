import { integer } from './rules.js';

/** Query fields of every paginated listing (spec 2.11, section 8): per_page 1-100 (default 15), page from 1. */
export const paginationQueryFields = {
  per_page: integer({ optional: true, min: 1, max: 100, description: 'Items per page, 1-100; default 15' }),
  page: integer({ optional: true, min: 1, description: 'Page number, from 1' }),
};

export const DEFAULT_PER_PAGE = 15;
