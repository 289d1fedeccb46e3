import { E164_MESSAGE, MAX_LEADS_PER_UPLOAD, type LeadInput } from '../../schemas/campaigns.js';
import { E164 } from '../../schemas/phoneNumbers.js';
import { RECORD_MAX_KEYS, RECORD_MAX_VALUE_LENGTH } from '../../schemas/rules.js';
import { ValidationError } from '../errors.js';
import { storableText } from '../store/text.js';
import { csvRecords, CsvError } from './csv.js';

/**
 * Leads as an upload gives them, one at a time (a CSV file is never held as rows): each with
 * where it was (the CSV line, the header being line 1; the JSON index, from 0), its number as
 * given and its variables. Then each number is checked and normalised, and bad rows are told apart.
 */

export type LeadSource = { readonly kind: 'json'; readonly leads: readonly LeadInput[] } | { readonly kind: 'csv'; readonly data: Buffer };

export interface LeadCandidate {
  readonly line: number;
  readonly phone: unknown;
  readonly variables: Record<string, string | number | boolean>;
  /** Why the row is refused whatever its number (a CSV row with more fields than the header). */
  readonly refused?: string;
}

export interface InvalidLead {
  line: number;
  phone_number: string;
  reason: string;
}

const fileError = (message: string) => ValidationError.field('file', message);
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * A column header as a variable name: kept when it is one already (`first_name`, `firstName`),
 * otherwise lower-cased with every run of other characters made one underscore (`First Name` ->
 * `first_name`), and `_` in front of a leading digit.
 */
export function variableName(header: string): string {
  const trimmed = header.trim();
  if (VARIABLE_NAME.test(trimmed) && trimmed.length <= 64) return trimmed;
  const name = trimmed.toLowerCase().replace(/[^a-z0-9_]+/g, '_').replace(/^_+|_+$/g, '').slice(0, 64);
  return /^\d/.test(name) ? `_${name}`.slice(0, 64) : name;
}

function* fromJson(leads: readonly LeadInput[]): Generator<LeadCandidate> {
  for (const [index, lead] of leads.entries()) yield { line: index, phone: lead.phone_number, variables: lead.variables ?? {} };
}

/** @throws ValidationError on `file` when the file has no header with `phone_number`, or cannot be read. */
function* fromCsv(data: Buffer): Generator<LeadCandidate> {
  const records = csvRecords(data);
  let columns: string[] | undefined;
  let phoneAt = -1;
  try {
    for (const record of records) {
      if (record.fields.every((field) => field.trim() === '')) continue;
      if (!columns) {
        columns = record.fields.map(variableName);
        phoneAt = columns.findIndex((name) => name.toLowerCase() === 'phone_number');
        if (phoneAt === -1) throw fileError('The file must have a phone_number column.');
        const seen = new Set<string>();
        for (const [index, name] of columns.entries()) {
          if (name === '') throw fileError(`Column ${index + 1} of the header has no name.`);
          if (seen.has(name)) throw fileError(`The header has the column ${name} twice.`);
          seen.add(name);
        }
        if (columns.length - 1 > RECORD_MAX_KEYS) throw fileError(`The file may not have more than ${RECORD_MAX_KEYS} columns besides phone_number.`);
        continue;
      }
      const variables: Record<string, string> = {};
      let refused: string | undefined;
      if (record.fields.length > columns.length) refused = `The row has ${record.fields.length} fields; the header has ${columns.length}.`;
      for (let i = 0; i < columns.length && i < record.fields.length; i++) {
        if (i === phoneAt) continue;
        const value = record.fields[i]!;
        if (value.length > RECORD_MAX_VALUE_LENGTH) refused ??= `The ${columns[i]} value may not be greater than ${RECORD_MAX_VALUE_LENGTH} characters.`;
        variables[columns[i]!] = storableText(value);
      }
      yield { line: record.line, phone: record.fields[phoneAt] ?? '', variables, ...(refused ? { refused } : {}) };
    }
  } catch (error) {
    if (error instanceof CsvError) throw fileError(error.message);
    throw error;
  }
  if (!columns) throw fileError('The file must have a header with a phone_number column.');
}

export function leadCandidates(source: LeadSource): Generator<LeadCandidate> {
  return source.kind === 'json' ? fromJson(source.leads) : fromCsv(source.data);
}

/** Formatting people write into numbers (`+1 (415) 555-0100`), dropped before the E.164 check. */
const FORMATTING = /[\s\-().\u00a0]/g;

/** The lead's number in E.164, or why it is refused. */
export function checkedNumber(candidate: LeadCandidate): { phone: string } | { reason: string } {
  if (candidate.refused) return { reason: candidate.refused };
  const raw = candidate.phone;
  if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '')) return { reason: 'The phone number is required.' };
  if (typeof raw !== 'string') return { reason: E164_MESSAGE };
  const phone = raw.replace(FORMATTING, '');
  return E164.test(phone) ? { phone } : { reason: E164_MESSAGE };
}

/** The number of a refused row as the answer shows it: as given, within reason. */
export function shownNumber(raw: unknown): string {
  if (raw === undefined || raw === null) return '';
  return storableText(typeof raw === 'string' ? raw : JSON.stringify(raw)).slice(0, 64);
}

export const tooManyRows = (kind: LeadSource['kind']) =>
  kind === 'csv' ? fileError(`The file may not have more than ${MAX_LEADS_PER_UPLOAD} rows.`) : ValidationError.field('leads', `The leads may not have more than ${MAX_LEADS_PER_UPLOAD} items.`);
