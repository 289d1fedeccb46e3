/**
 * The pagination envelope of spec 2.11, as Laravel's LengthAwarePaginator renders it
 * (`withQueryString()`): URLs built from PUBLIC_URL with the request's other query parameters
 * kept, `links` with `&laquo; Previous`, page numbers with `...` gaps, and `Next &raquo;`.
 */

export interface Page<T> {
  readonly items: readonly T[];
  readonly total: number;
  /** 1-based page asked for; may lie past the last page (then `items` is empty). */
  readonly page: number;
  readonly perPage: number;
}

export interface PageLink {
  readonly url: string | null;
  readonly label: string;
  readonly active: boolean;
}

export interface PaginationEnvelope<T> {
  current_page: number;
  data: T[];
  first_page_url: string;
  from: number | null;
  last_page: number;
  last_page_url: string;
  links: PageLink[];
  next_page_url: string | null;
  path: string;
  per_page: number;
  prev_page_url: string | null;
  to: number | null;
  total: number;
}

/** Laravel's UrlWindow with `onEachSide = 3`: page numbers to show, `null` for a `...` gap. */
export function pageWindow(current: number, last: number, onEachSide = 3): Array<number | null> {
  const range = (from: number, to: number): number[] => Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
  const window = onEachSide + 4;
  if (last < onEachSide * 2 + 8) return range(1, last);
  if (current <= window) return [...range(1, window + onEachSide), null, last - 1, last];
  if (current > last - window) return [1, 2, null, ...range(last - (window + (onEachSide - 1)), last)];
  return [1, 2, null, ...range(current - onEachSide, current + onEachSide), null, last - 1, last];
}

/**
 * @param publicUrl origin without trailing slash (PUBLIC_URL)
 * @param path request path, e.g. `/api/user/calls`
 * @param rawQuery the request's query string; `page` is replaced, everything else kept in order
 */
export function paginate<T>(page: Page<T>, publicUrl: string, path: string, rawQuery: string): PaginationEnvelope<T> {
  const base = `${publicUrl}${path}`;
  const url = (n: number): string => {
    const params = new URLSearchParams(rawQuery);
    params.set('page', String(n));
    return `${base}?${params.toString()}`;
  };
  const lastPage = Math.max(1, Math.ceil(page.total / page.perPage));
  const current = page.page;
  const from = page.items.length > 0 ? (current - 1) * page.perPage + 1 : null;
  const to = from === null ? null : from + page.items.length - 1;
  const links: PageLink[] = [
    { url: current > 1 ? url(current - 1) : null, label: '&laquo; Previous', active: false },
    ...pageWindow(current, lastPage).map((n) => (n === null ? { url: null, label: '...', active: false } : { url: url(n), label: String(n), active: n === current })),
    { url: current < lastPage ? url(current + 1) : null, label: 'Next &raquo;', active: false },
  ];
  return {
    current_page: current,
    data: [...page.items],
    first_page_url: url(1),
    from,
    last_page: lastPage,
    last_page_url: url(lastPage),
    links,
    next_page_url: current < lastPage ? url(current + 1) : null,
    path: base,
    per_page: page.perPage,
    prev_page_url: current > 1 ? url(current - 1) : null,
    to,
    total: page.total,
  };
}
