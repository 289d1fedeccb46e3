import { arrayOf, integer, object, oneOf, text, url } from './rules.js';
import { compileSchema } from './validator.js';

export const TOOL_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export const TOOL_PARAMETER_TYPES = ['string', 'number', 'boolean'] as const;

export interface ToolHeader {
  name: string;
  value: string;
}
export interface ToolParameter {
  name: string;
  type: (typeof TOOL_PARAMETER_TYPES)[number];
  description: string;
}
export interface ToolInput {
  name: string;
  description: string;
  endpoint: string;
  method: (typeof TOOL_METHODS)[number];
  timeout?: number;
  headers?: ToolHeader[];
  schema?: ToolParameter[];
}

const fields = (optional: boolean) => ({
  name: text({
    optional,
    max: 64,
    pattern: /^[a-z][a-z_]*$/,
    patternMessage: 'Tool name must contain only lowercase letters and underscores, and start with a letter.',
    description: 'Lowercase letters and underscores, starting with a letter',
  }),
  description: text({ optional, max: 255, description: 'When and how the AI should use the tool' }),
  endpoint: url({ optional, description: 'URL the platform calls' }),
  method: oneOf(TOOL_METHODS, { optional }),
  timeout: integer({ optional: true, min: 1, max: 30, description: 'Seconds; default 10' }),
  headers: arrayOf(object({ name: text({ max: 255, pattern: /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/ }), value: text({ max: 4096 }) }), { optional: true, max: 50 }),
  schema: arrayOf(object({ name: text({ min: 2, max: 32 }), type: oneOf(TOOL_PARAMETER_TYPES), description: text({ min: 3, max: 255 }) }), { optional: true, max: 50 }),
});

export const createToolSchema = compileSchema<ToolInput>(fields(false));
export const updateToolSchema = compileSchema<Partial<ToolInput>>(fields(true), { message: 'Validation failed' });
