// Piscina's worker entry. Worker threads do not get tsx's loader from `--import tsx`, so the
// TypeScript tasks are loaded through tsx's API; piscina awaits each named export.
import { tsImport } from 'tsx/esm/api';

const tasks = tsImport('./tasks.ts', import.meta.url);

export const inspectUpload = tasks.then((module) => module.inspectUpload);
export const extractFile = tasks.then((module) => module.extractFile);
export const extractHtml = tasks.then((module) => module.extractHtml);
export const chunkAndEmbed = tasks.then((module) => module.chunkAndEmbed);
export const embedTexts = tasks.then((module) => module.embedTexts);
export const formatVectors = tasks.then((module) => module.formatVectors);
