/**
 * CSV as RFC 4180 writes it, read straight from the uploaded bytes one record at a time, so a
 * 20 MB file is never copied into one string: fields are quoted or not, `""` is a quote inside a
 * quoted field, which may hold delimiters and line breaks; records end with CRLF, LF or CR; a
 * UTF-8 byte order mark is skipped. The delimiter is the comma, or the semicolon or tab when the
 * first line has more of those than commas (spreadsheets in many locales export `;`). Text is
 * decoded as UTF-8 (bytes that are not become U+FFFD).
 */

const QUOTE = 0x22;
const CR = 0x0d;
const LF = 0x0a;
const DELIMITERS = [0x2c, 0x3b, 0x09] as const;

export interface CsvRecord {
  /** The line of the file where the record starts, from 1 (a quoted line break moves the next record down). */
  readonly line: number;
  readonly fields: string[];
}

/** The file cannot be read as CSV; `line` is where the problem starts. */
export class CsvError extends Error {
  override readonly name = 'CsvError';

  constructor(readonly line: number, message: string) {
    super(message);
  }
}

function delimiterOf(data: Buffer, from: number): number {
  const counts = new Map<number, number>(DELIMITERS.map((d) => [d, 0]));
  for (let i = from; i < data.length && data[i] !== LF && data[i] !== CR; i++) {
    const byte = data[i]!;
    if (counts.has(byte)) counts.set(byte, counts.get(byte)! + 1);
  }
  let best: number = DELIMITERS[0];
  for (const d of DELIMITERS) if (counts.get(d)! > counts.get(best)!) best = d;
  return best;
}

function countLineFeeds(data: Buffer, from: number, to: number): number {
  let count = 0;
  for (let at = data.indexOf(LF, from); at !== -1 && at < to; at = data.indexOf(LF, at + 1)) count++;
  return count;
}

/**
 * The records of a CSV file, in order, each with the line it starts on.
 * @throws CsvError when a quoted field is never closed.
 */
export function* csvRecords(data: Buffer): Generator<CsvRecord> {
  let i = data.length >= 3 && data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf ? 3 : 0;
  const n = data.length;
  const delimiter = delimiterOf(data, i);
  let line = 1;
  while (i < n) {
    const startLine = line;
    const fields: string[] = [];
    for (;;) {
      let value: string;
      if (data[i] === QUOTE) {
        // A quoted field: segments between doubled quotes, then anything up to the delimiter (lenient).
        const parts: string[] = [];
        let from = i + 1;
        for (;;) {
          const close = data.indexOf(QUOTE, from);
          if (close === -1) throw new CsvError(startLine, `The quoted field that starts on line ${startLine} is never closed.`);
          line += countLineFeeds(data, from, close);
          parts.push(data.toString('utf8', from, close));
          if (data[close + 1] === QUOTE) {
            parts.push('"');
            from = close + 2;
            continue;
          }
          i = close + 1;
          break;
        }
        const rest = i;
        while (i < n && data[i] !== delimiter && data[i] !== CR && data[i] !== LF) i++;
        if (i > rest) parts.push(data.toString('utf8', rest, i));
        value = parts.join('');
      } else {
        const from = i;
        while (i < n && data[i] !== delimiter && data[i] !== CR && data[i] !== LF) i++;
        value = data.toString('utf8', from, i);
      }
      fields.push(value);
      if (i < n && data[i] === delimiter) {
        i++;
        if (i < n) continue;
        fields.push('');
      }
      break;
    }
    if (data[i] === CR) i++;
    if (data[i] === LF) i++;
    line++;
    yield { line: startLine, fields };
  }
}
