import { integer, oneOf } from './rules.js';
import { compileSchema } from './validator.js';

export const ENGINE_MODES = ['pipeline', 'multimodal', 'dualplex'] as const;

export const voicesQuerySchema = compileSchema<{ mode?: (typeof ENGINE_MODES)[number]; language_id?: number }>({
  mode: oneOf(ENGINE_MODES, { optional: true }),
  language_id: integer({ optional: true, min: 1 }),
});

export const modelsQuerySchema = compileSchema<{ type?: 'llm' | 'multimodal' }>({
  type: oneOf(['llm', 'multimodal'], { optional: true }),
});
