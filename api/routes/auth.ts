import type { AuthService } from '../../runtime/auth/service.js';
import { loginSchema, registerSchema } from '../../schemas/auth.js';
import { userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { constant, dataOf, isoTimestamp, message, object, string } from '../../schemas/shapes.js';
import { registeredUser, user } from '../../schemas/responses.js';

export function authRoutes(auth: AuthService): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/auth/register',
      auth: 'none',
      tag: 'Authentication',
      summary: 'Create a user and a first session token',
      requestSchema: registerSchema.schema,
      responses: { 201: body(object({ message: string('What happened, in words for people'), user: registeredUser, token: string('A session token (30 days), for the Authorization header') }, 'The new user and a session token')) },
      async handler(req) {
        const { user, token } = await auth.register(registerSchema(req.body));
        return json(201, {
          message: 'Registration successful.',
          user: { id: user.id, name: user.name, email: user.email, balance: user.balance },
          token,
        });
      },
    },
    {
      method: 'POST',
      path: '/api/auth/login',
      auth: 'none',
      tag: 'Authentication',
      summary: 'Exchange email and password for a session token (30 days)',
      errors: [401, 429],
      responses: { 200: body(object({ token: string('The session token, for the Authorization header'), token_type: constant('Bearer', 'Always Bearer'), expires_at: isoTimestamp('When the token expires') }, 'A session token')) },
      requestSchema: loginSchema.schema,
      async handler(req) {
        const { token, expiresAt } = await auth.login(loginSchema(req.body));
        return json(200, { token, token_type: 'Bearer', expires_at: expiresAt });
      },
    },
    {
      method: 'POST',
      path: '/api/auth/logout',
      auth: 'user',
      tag: 'Authentication',
      summary: 'Revoke the session token in use',
      responses: { 200: body(message('Logged out')) },
      async handler(req) {
        await auth.logout(req.principal!);
        return json(200, { message: 'Logged out successfully.' });
      },
    },
    {
      method: 'GET',
      path: '/api/user',
      auth: 'user',
      tag: 'Authentication',
      summary: 'The authenticated user',
      responses: { 200: body(dataOf(user, 'The authenticated user')) },
      async handler(req) {
        return json(200, { data: await auth.profile(userId(req)) });
      },
    },
  ];
}
