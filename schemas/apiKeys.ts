import { compileSchema } from './validator.js';
import { text } from './rules.js';

export interface CreateApiKeyInput {
  name: string;
}
export const createApiKeySchema = compileSchema<CreateApiKeyInput>({
  name: text({ max: 255, description: 'Label of the key' }),
});
