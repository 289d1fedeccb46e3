/**
 * The Laravel message mapping shared by every endpoint:
 * 1. required, string, max/min length, integer, between, boolean, enum, url, email, uuid, array.
 * 2. nested paths use dots (`links.0.link`) and underscores read as spaces in messages.
 * 3. null is refused on optional non-nullable fields and accepted on nullable ones.
 * 4. unknown keys are removed; numeric strings convert where the rule allows; custom messages pass through.
 * 5. a non-object body validates as an empty one; a summary counts further errors.
 */
import t from 'tap';
import { ValidationError } from '../runtime/errors.js';
import { arrayOf, boolean, integer, number, object, oneOf, text, url, uuid } from '../schemas/rules.js';
import { compileSchema } from '../schemas/validator.js';

const schema = compileSchema<Record<string, unknown>>({
  name: text({ max: 5 }),
  speech_speed: number({ min: 0.7, max: 1.2, optional: true }),
  max_duration: integer({ min: 20, max: 1200, optional: true }),
  record: boolean({ optional: true }),
  mode: oneOf(['pipeline', 'multimodal'], { optional: true }),
  webhook_url: url({ optional: true, nullable: true }),
  assistant_id: uuid({ optional: true }),
  tool: text({ optional: true, pattern: /^[a-z][a-z_]*$/, patternMessage: 'Tool name must contain only lowercase letters and underscores, and start with a letter.' }),
  links: arrayOf(object({ link: url() }), { optional: true }),
  description: text({ optional: true, min: 3 }),
});

function errorsOf(input: unknown): { message: string; errors: Record<string, string[]> } {
  try {
    schema(input);
  } catch (error) {
    if (error instanceof ValidationError) return { message: error.message, errors: error.errors };
    throw error;
  }
  return { message: '', errors: {} };
}

t.test('messages', async (t) => {
  const { errors, message } = errorsOf({
    name: 'toolong',
    speech_speed: 2,
    max_duration: 100.5,
    record: 'maybe',
    mode: 'other',
    webhook_url: 'not a url',
    assistant_id: 'nope',
    tool: 'Bad-Name',
    links: [{ link: 'x' }, {}],
    description: 'ab',
  });
  t.same(errors, {
    name: ['The name may not be greater than 5 characters.'],
    speech_speed: ['The speech speed must be between 0.7 and 1.2.'],
    max_duration: ['The max duration must be an integer.'],
    record: ['The record field must be true or false.'],
    mode: ['The selected mode is invalid.'],
    webhook_url: ['The webhook url must be a valid URL.'],
    assistant_id: ['The assistant id must be a valid UUID.'],
    tool: ['Tool name must contain only lowercase letters and underscores, and start with a letter.'],
    'links.0.link': ['The links.0.link must be a valid URL.'],
    'links.1.link': ['The links.1.link field is required.'],
    description: ['The description must be at least 3 characters.'],
  });
  t.equal(message, 'The name may not be greater than 5 characters. (and 10 more errors)');
  t.same(errorsOf({}).errors, { name: ['The name field is required.'] });
  t.same(errorsOf({ name: '' }).errors, { name: ['The name field is required.'] });
  t.same(errorsOf({ name: 5 }).errors, { name: ['The name must be a string.'] });
  t.same(errorsOf({ name: 'a', links: 'x' }).errors, { links: ['The links must be an array.'] });
  t.same(errorsOf({ name: 'a', links: [{ link: 'http://[::1' }, { link: 'http://a%zz/' }, { link: 'http://x:99999/' }, { link: 'https://ok.example/a' }] }).errors, {
    'links.0.link': ['The links.0.link must be a valid URL.'],
    'links.1.link': ['The links.1.link must be a valid URL.'],
    'links.2.link': ['The links.2.link must be a valid URL.'],
  }, 'URLs that look right but do not parse');
  t.same(errorsOf('a string body').errors, { name: ['The name field is required.'] });
  t.same(errorsOf(null).errors, { name: ['The name field is required.'] });
  t.same(errorsOf([1, 2]).errors, { name: ['The name field is required.'] });
});

t.test('lengths count characters, not UTF-16 units', async (t) => {
  const schema = compileSchema<{ name: string; code?: string }>({ name: text({ max: 5 }), code: text({ optional: true, min: 3 }) });
  t.same(schema({ name: '😀'.repeat(5) }), { name: '😀'.repeat(5) }, 'five emoji are five characters');
  const errorsOf = (input: unknown) => {
    try {
      schema(input);
    } catch (error) {
      return (error as ValidationError).errors;
    }
  };
  t.same(errorsOf({ name: '😀'.repeat(6) }), { name: ['The name may not be greater than 5 characters.'] });
  t.same(errorsOf({ name: 'a', code: '😀😀' }), { code: ['The code must be at least 3 characters.'] }, 'two emoji are two characters');
});

t.test('blank values', async (t) => {
  const schema = compileSchema<{ name: string; limit?: number; mode?: string; note?: string | null }>({
    name: text({ max: 10 }),
    limit: integer({ optional: true, min: 1, max: 50 }),
    mode: oneOf(['a', 'b'], { optional: true }),
    note: text({ optional: true, nullable: true }),
  });
  t.same(schema({ name: 'x', limit: '', mode: '', note: '' }), { name: 'x', note: null }, 'an optional number or choice left blank is not given; blank text in a nullable field is null');
  const refused = (() => {
    try {
      schema({ name: '' });
    } catch (error) {
      return (error as ValidationError).errors;
    }
  })();
  t.same(refused, { name: ['The name field is required.'] });
});

t.test('nulls', async (t) => {
  t.same(errorsOf({ name: 'a', speech_speed: null, description: null, links: [{ link: null }] }).errors, {
    speech_speed: ['The speech speed must be a number.'],
    description: ['The description must be a string.'],
    'links.0.link': ['The links.0.link field is required.'],
  });
  t.same(errorsOf({ name: 'a', webhook_url: null }).errors, {}, 'nullable accepts null');
});

t.test('normalisation', async (t) => {
  const value = schema({ name: 'abc', max_duration: '30', record: 'true', unknown: 'dropped', links: [{ link: 'https://a.example', extra: 1 }] });
  t.same(value, { name: 'abc', max_duration: 30, record: true, links: [{ link: 'https://a.example' }] });
});
