import { compileSchema } from './validator.js';
import { email, text } from './rules.js';

export interface RegisterInput {
  name: string;
  email: string;
  password: string;
}
export const registerSchema = compileSchema<RegisterInput>({
  name: text({ max: 255 }),
  email: email(),
  password: text({ min: 8, max: 200 }),
});

export interface LoginInput {
  email: string;
  password: string;
}
export const loginSchema = compileSchema<LoginInput>({
  email: email(),
  password: text({ max: 200 }),
});
