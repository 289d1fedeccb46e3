import t from 'tap';
import { TapFailures } from './helpers/tapFailures.js';

const stream = `# Subtest: test/a.test.ts
    # Subtest: outer
        # Subtest: inner
            not ok 1 - one is two
              ---
              compare: ===
              ...
            ok 2 - should be ok
            1..2
        not ok 1 - inner # time=1.2ms
        1..1
    not ok 1 - outer # time=2.0ms
    # Subtest: timed out
    not ok 2 - timed out # time=180000ms
    # Subtest: skipped
    not ok 3 - not yet # TODO later
    1..3
not ok 1 - test/a.test.ts # time=3ms
  ---
  exitCode: 1
  ...
# Subtest: test/b.test.ts
    ok 1 - fine
not ok 2 - test/b.test.ts # time=4ms
`;

t.test('every failed point once, with where it sits and its diagnostics, todo left out', async (t) => {
  const failures = new TapFailures();
  for (const line of stream.split('\n')) failures.line(line);
  t.same(failures.summary(), [
    'not ok: test/a.test.ts > outer > inner > one is two\n    compare: ===',
    'not ok: test/a.test.ts > timed out',
    'not ok: test/b.test.ts',
  ]);
});
