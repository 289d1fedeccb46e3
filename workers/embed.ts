/**
 * The built-in local embedder: feature-hashed vectors of word unigrams, word bigrams and
 * character trigrams, with sublinear term frequency and common function words down-weighted
 * (a fixed stand-in for IDF, since no corpus statistics exist up front), L2-normalised so a dot
 * product is the cosine. No network, no model file; good enough to rank passages that share
 * words and word pieces with a question, and deterministic.
 */

export const LOCAL_DIMENSIONS = 384;

const STOPWORDS = new Set(
  'a an and are as at be been but by can could do does for from had has have how i if in into is it its me my no not of on or our so than that the their them then there these they this to us was we were what when where which who why will with would you your'.split(' '),
);

function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

export function tokenize(text: string): string[] {
  return text.toLowerCase().normalize('NFKC').match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** One vector of LOCAL_DIMENSIONS floats. */
export function embedLocal(text: string, dimensions = LOCAL_DIMENSIONS): Float32Array {
  const counts = new Map<string, number>();
  const bump = (feature: string, weight: number): void => void counts.set(feature, (counts.get(feature) ?? 0) + weight);
  const words = tokenize(text);
  for (let i = 0; i < words.length; i++) {
    const word = words[i]!;
    const weight = STOPWORDS.has(word) ? 0.1 : 1;
    bump(`w:${word}`, weight);
    if (i + 1 < words.length) bump(`b:${word} ${words[i + 1]}`, 0.5 * weight);
    const padded = `^${word}$`;
    for (let j = 0; j + 3 <= padded.length; j++) bump(`c:${padded.slice(j, j + 3)}`, 0.3 * weight);
  }
  const vector = new Float32Array(dimensions);
  for (const [feature, count] of counts) {
    const hash = fnv1a(feature);
    const index = hash % dimensions;
    const sign = hash & 0x80000000 ? -1 : 1;
    vector[index]! += sign * (1 + Math.log(1 + count));
  }
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm);
  if (norm > 0) for (let i = 0; i < dimensions; i++) vector[i]! /= norm;
  return vector;
}

/** Many texts into one flat buffer (`texts.length × dimensions`), ready to transfer. */
export function embedLocalMany(texts: readonly string[], dimensions = LOCAL_DIMENSIONS): Float32Array {
  const out = new Float32Array(texts.length * dimensions);
  texts.forEach((text, i) => out.set(embedLocal(text, dimensions), i * dimensions));
  return out;
}
