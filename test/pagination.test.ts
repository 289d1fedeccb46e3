/**
 * The pagination envelope (spec 2.11, Laravel's rendering):
 * 1. a middle page: from/to, prev/next URLs from PUBLIC_URL with the other query parameters kept.
 * 2. an empty result: one page, from/to null, no next or previous.
 * 3. the last page and a page past the end.
 * 4. link windows with `...` gaps for long result sets, exactly as Laravel's UrlWindow.
 * 5. the shared query fields: per_page 1-100, page from 1, numeric strings converted.
 */
import t from 'tap';
import { pageWindow, paginate } from '../api/http/pagination.js';
import { ValidationError } from '../runtime/errors.js';
import { paginationQueryFields } from '../schemas/pagination.js';
import { compileSchema } from '../schemas/validator.js';

const items = (n: number) => Array.from({ length: n }, (_, i) => ({ i }));

t.test('a middle page', async (t) => {
  const env = paginate({ items: items(15), total: 40, page: 2, perPage: 15 }, 'https://voice.example.com', '/api/user/calls', 'status=completed&page=2&tags%5B%5D=a');
  t.same(Object.keys(env), ['current_page', 'data', 'first_page_url', 'from', 'last_page', 'last_page_url', 'links', 'next_page_url', 'path', 'per_page', 'prev_page_url', 'to', 'total']);
  t.match(env, {
    current_page: 2,
    from: 16,
    to: 30,
    last_page: 3,
    per_page: 15,
    total: 40,
    path: 'https://voice.example.com/api/user/calls',
    first_page_url: 'https://voice.example.com/api/user/calls?status=completed&page=1&tags%5B%5D=a',
    last_page_url: 'https://voice.example.com/api/user/calls?status=completed&page=3&tags%5B%5D=a',
    next_page_url: 'https://voice.example.com/api/user/calls?status=completed&page=3&tags%5B%5D=a',
    prev_page_url: 'https://voice.example.com/api/user/calls?status=completed&page=1&tags%5B%5D=a',
  });
  t.same(env.links.map((l) => [l.label, l.active, l.url !== null]), [
    ['&laquo; Previous', false, true],
    ['1', false, true],
    ['2', true, true],
    ['3', false, true],
    ['Next &raquo;', false, true],
  ]);
  t.equal(paginate({ items: [], total: 0, page: 1, perPage: 15 }, 'http://h', '/p', '').first_page_url, 'http://h/p?page=1', 'page appended when absent');
});

t.test('empty, last and past-the-end pages', async (t) => {
  const empty = paginate({ items: [], total: 0, page: 1, perPage: 15 }, 'http://h', '/api/user/calls', '');
  t.match(empty, { current_page: 1, data: [], from: null, to: null, last_page: 1, next_page_url: null, prev_page_url: null, total: 0 });
  t.same(empty.links, [
    { url: null, label: '&laquo; Previous', active: false },
    { url: 'http://h/api/user/calls?page=1', label: '1', active: true },
    { url: null, label: 'Next &raquo;', active: false },
  ]);
  const last = paginate({ items: items(10), total: 40, page: 3, perPage: 15 }, 'http://h', '/x', 'page=3');
  t.match(last, { from: 31, to: 40, next_page_url: null, prev_page_url: 'http://h/x?page=2' });
  const past = paginate({ items: [], total: 40, page: 9, perPage: 15 }, 'http://h', '/x', 'page=9');
  t.match(past, { current_page: 9, from: null, to: null, last_page: 3, next_page_url: null, prev_page_url: 'http://h/x?page=8' });
});

t.test('link windows', async (t) => {
  t.same(pageWindow(1, 13), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
  t.same(pageWindow(1, 14), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, null, 13, 14]);
  t.same(pageWindow(10, 30), [1, 2, null, 7, 8, 9, 10, 11, 12, 13, null, 29, 30]);
  t.same(pageWindow(28, 30), [1, 2, null, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]);
  const env = paginate({ items: items(1), total: 1000, page: 50, perPage: 1 }, 'http://h', '/x', '');
  t.equal(env.links.filter((l) => l.label === '...').length, 2);
  t.same(env.links.find((l) => l.active), { url: 'http://h/x?page=50', label: '50', active: true });
});

t.test('page query bounds', async (t) => {
  const query = compileSchema<{ per_page?: number; page?: number }>(paginationQueryFields);
  t.same(query({ per_page: '100', page: '3' }), { per_page: 100, page: 3 });
  t.same(query({}), {});
  const errorsOf = (input: unknown) => {
    try {
      query(input);
    } catch (error) {
      return (error as ValidationError).errors;
    }
    return {};
  };
  t.same(errorsOf({ per_page: '0' }), { per_page: ['The per page must be between 1 and 100.'] });
  t.same(errorsOf({ per_page: '101' }), { per_page: ['The per page must be between 1 and 100.'] });
  t.same(errorsOf({ page: '0' }), { page: ['The page must be at least 1.'] });
  t.same(errorsOf({ per_page: 'ten' }), { per_page: ['The per page must be a number.'] });
});
