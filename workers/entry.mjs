// Piscina's worker entry. Worker threads do not get tsx's loader from `--import tsx`, so the
// TypeScript tasks are loaded through tsx's API; piscina awaits each named export.
import { tsImport } from 'tsx/esm/api';

const tasks = tsImport('./tasks.ts', import.meta.url);

export const inspectUpload = tasks.then((module) => module.inspectUpload);
