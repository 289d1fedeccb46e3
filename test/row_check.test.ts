/**
 * The compiled row checks (runtime/store/rowCheck.ts) against zod itself: on random values of
 * every kind, a check accepts exactly what its schema accepts and returns what zod's parse returns;
 * the platform's row schemas compile; a refused row still fails the query with zod's issues.
 */
import { isDeepStrictEqual } from 'node:util';
import t from 'tap';
import { sql } from 'slonik';
import { z, type ZodTypeAny } from 'zod';
import { assistantRow, assistantViewRow } from '../runtime/assistants/repository.js';
import { callRow, indexedCallRow } from '../runtime/calls/repository.js';
import { languageRow, modelRow, providerRow, voiceRow } from '../runtime/catalog/repository.js';
import { conversationRow, listItemRow, messageRow } from '../runtime/conversations/repository.js';
import { documentRow, knowledgebaseRow } from '../runtime/knowledge/repository.js';
import { assignableRow, inventoryRow, ownedNumberRow } from '../runtime/phoneNumbers/repository.js';
import { REFUSED, rowCheck } from '../runtime/store/rowCheck.js';
import { toolRow } from '../runtime/tools/repository.js';
import { userRow } from '../runtime/users/repository.js';
import { deliveryRow } from '../runtime/webhooks/repository.js';
import { startTestPlatform } from './helpers/platform.js';

let seed = 11;
const random = (n: number) => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31), seed % n);

/** A value of any kind a row could hold, or not: the corners each check must tell apart. */
function anything(depth = 0): unknown {
  const kinds: Array<() => unknown> = [
    () => null,
    () => undefined,
    () => ['', 'a', 'inbound', 'vad', '__proto__', '1'][random(6)],
    () => [0, 1, -2.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53][random(6)],
    () => random(2) === 0,
    () => new Date(0),
    () => new Map(),
    () => Buffer.from('x'),
    () => Promise.resolve(1),
  ];
  if (depth < 2) {
    kinds.push(
      () => Array.from({ length: random(3) }, () => anything(depth + 1)),
      () => {
        const object: Record<string, unknown> = {};
        for (const key of ['a', 'b', 'name', 'type', 'extra', '__proto__'].slice(0, random(7))) {
          if (random(3) > 0) Object.defineProperty(object, key, { value: anything(depth + 1), enumerable: true, writable: true, configurable: true });
        }
        return object;
      },
    );
  }
  return kinds[random(kinds.length)]!();
}

/** Each schema with a value it accepts: random values rarely pass an object's schema, so most are this one changed in one place. */
const schemas: Record<string, [ZodTypeAny, unknown]> = {
  string: [z.string(), 'a'],
  number: [z.number(), 1],
  boolean: [z.boolean(), true],
  enum: [z.enum(['inbound', 'outbound', 'vad']), 'vad'],
  nullable: [z.number().nullable(), null],
  array: [z.array(z.string()), ['a', 'b']],
  'array of objects': [z.array(z.object({ name: z.string(), type: z.enum(['vad', 'inbound']) })), [{ name: 'a', type: 'vad' }, { name: 'b', type: 'inbound' }]],
  record: [z.record(z.unknown()), { a: 1, b: 'x' }],
  'record of a union': [z.record(z.union([z.string(), z.number(), z.boolean()])), { a: 1, b: 'x', name: true }],
  union: [z.union([z.string(), z.number().nullable()]), 2],
  object: [z.object({ a: z.number(), b: z.string().nullable(), name: z.unknown() }), { a: 1, b: null, name: 'x' }],
  'nested object': [z.object({ a: z.object({ b: z.array(z.number()) }).nullable(), type: z.enum(['vad']) }), { a: { b: [1, 2] }, type: 'vad' }],
};

/** `value` with one place (chosen at random, at any depth) replaced, removed, or given an extra key. */
function changed(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || random(4) === 0) return anything();
  const copy: Record<string, unknown> = Array.isArray(value) ? ([...value] as never) : { ...(value as Record<string, unknown>) };
  const keys = Object.keys(copy);
  const action = random(4);
  // An own `__proto__`, as JSON.parse makes one from a jsonb column (an assignment would set the prototype).
  if (action === 0 || keys.length === 0) Object.defineProperty(copy, ['extra', '__proto__', 'a'][random(3)]!, { value: anything(), enumerable: true, writable: true, configurable: true });
  else if (action === 1 && !Array.isArray(copy)) delete copy[keys[random(keys.length)]!];
  else {
    const key = keys[random(keys.length)]!;
    copy[key] = changed(copy[key]);
  }
  return copy;
}

t.test('a compiled check accepts what zod accepts and returns what zod returns', async (t) => {
  for (const [name, [schema, valid]] of Object.entries(schemas)) {
    const check = rowCheck(schema);
    t.ok(check, `${name} compiles`);
    let accepted = 0;
    let disagreements = 0;
    const examples: string[] = [];
    for (let i = 0; i < 4_000; i++) {
      const value = i % 4 === 0 ? anything() : i % 4 === 1 ? valid : changed(valid);
      const ours = check!(value);
      const theirs = schema.safeParse(value);
      const same = ours === REFUSED ? !theirs.success : theirs.success && isDeepStrictEqual(ours, theirs.data);
      if (!same) {
        disagreements++;
        if (examples.length < 3) examples.push(String(JSON.stringify(value)));
      }
      if (ours !== REFUSED) accepted++;
    }
    t.equal(disagreements, 0, `${name}: ${accepted} of 4,000 accepted, as zod does ${examples.join(' ')}`);
    t.ok(accepted > 1_000 && accepted < 4_000, `${name}: both kinds of value were tried`);
  }
});

t.test('refinements, defaults, transforms and strict objects are left to zod', async (t) => {
  for (const schema of [z.string().min(1), z.number().int(), z.instanceof(Buffer), z.string().default('x'), z.object({ a: z.string() }).strict(), z.object({ a: z.string() }).passthrough(), z.string().transform((s) => s.length), z.array(z.string()).max(3)]) {
    t.equal(rowCheck(schema), null);
  }
});

t.test("the platform's row schemas compile, and the assistant read's check returns zod's row", async (t) => {
  const rows = { assistantRow, assistantViewRow, callRow, indexedCallRow, languageRow, modelRow, providerRow, voiceRow, conversationRow, listItemRow, messageRow, documentRow, knowledgebaseRow, assignableRow, inventoryRow, ownedNumberRow, toolRow, userRow, deliveryRow };
  t.same(Object.entries(rows).filter(([, schema]) => rowCheck(schema) === null).map(([name]) => name), [], 'none is left to zod');

  const api = await startTestPlatform(t);
  const user = await api.user();
  const assistant = await api.assistant(user.token, { variables: { plan: 'gold', seats: 3, vip: true } });
  const row = await api.platform.runtime.pool.one(sql.unsafe`SELECT a.*, '{}'::bigint[] AS tool_ids FROM assistants a WHERE id = ${assistant.id}`);
  t.same(rowCheck(assistantRow)!(row), assistantRow.parse(row));
  t.notOk('user_id' in (rowCheck(assistantViewRow)!(row) as object), 'a view leaves the owner out');

  await t.rejects(
    api.platform.runtime.pool.one(sql.type(z.object({ id: z.string() }))`SELECT 1::int AS id`),
    { message: /do not conform with the schema/, issues: [{ code: 'invalid_type', expected: 'string', received: 'number', path: ['id'] }] },
    "a refused row fails the query with zod's issues",
  );
});
