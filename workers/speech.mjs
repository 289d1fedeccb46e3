// The speech synthesis worker thread's entry. Worker threads do not get tsx's loader from
// `--import tsx`, so the TypeScript module is loaded through tsx's API.
import { tsImport } from 'tsx/esm/api';

await tsImport('./speech.ts', import.meta.url);
