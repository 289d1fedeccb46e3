import type { PhoneNumberService } from '../../runtime/phoneNumbers/service.js';
import { assignableQuerySchema, phoneNumberSchema, searchNumbersSchema } from '../../schemas/phoneNumbers.js';
import { idParam, userId } from '../http/params.js';
import { json, type RouteDefinition } from '../http/types.js';
import { body } from '../http/contract.js';
import { array, dataOf, message, messageWith } from '../../schemas/shapes.js';
import { assignableNumber, ownedNumber, purchasableNumber } from '../../schemas/responses.js';

const owned = body(dataOf(array(ownedNumber, 'The numbers'), 'Your numbers'));

const tag = 'Phone numbers';

export function phoneNumberRoutes(numbers: PhoneNumberService): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/api/user/phone-numbers/all',
      auth: 'user',
      tag,
      summary: 'Every owned number, whatever its SMS capability or subscription',
      responses: { 200: owned },
      async handler(req) {
        return json(200, { data: await numbers.listAll(userId(req)) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/phone-numbers',
      auth: 'user',
      tag,
      summary: 'Legacy: SMS-capable numbers with an active subscription',
      responses: { 200: owned },
      async handler(req) {
        return json(200, { data: await numbers.listLegacy(userId(req)) });
      },
    },
    {
      method: 'GET',
      path: '/api/user/phone-numbers/search',
      auth: 'user',
      tag,
      summary: 'Purchasable numbers by country (default US), optionally containing digits',
      querySchema: searchNumbersSchema.schema,
      responses: { 200: body(dataOf(array(purchasableNumber, 'Empty when nothing matches'), 'Numbers you can rent')) },
      async handler(req) {
        const { country_code, contains } = searchNumbersSchema(req.query);
        return json(200, { data: await numbers.search(country_code ?? 'US', contains) });
      },
    },
    {
      method: 'POST',
      path: '/api/user/phone-numbers/purchase',
      auth: 'user',
      tag,
      summary: 'Rent a number; the first month is debited from the balance',
      requestSchema: phoneNumberSchema.schema,
      errors: [402],
      responses: { 201: body(messageWith(ownedNumber, 'The number, now yours')) },
      async handler(req) {
        const { phone_number, carrier } = phoneNumberSchema(req.body);
        return json(201, { message: 'Phone number purchased successfully.', data: await numbers.purchase(userId(req), phone_number, carrier) });
      },
    },
    {
      method: 'POST',
      path: '/api/user/phone-numbers/caller-id',
      auth: 'user',
      tag,
      summary: 'Register a number you own elsewhere as outbound caller ID',
      requestSchema: phoneNumberSchema.schema,
      responses: { 201: body(messageWith(ownedNumber, 'The registered number')) },
      async handler(req) {
        const { phone_number, carrier } = phoneNumberSchema(req.body);
        return json(201, { message: 'Caller ID registered successfully.', data: await numbers.registerCallerId(userId(req), phone_number, carrier) });
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/phone-numbers/:id',
      auth: 'user',
      tag,
      summary: 'Release a number (refused while an assistant uses it)',
      errors: [422],
      responses: { 200: body(message('Released')) },
      async handler(req) {
        await numbers.release(userId(req), idParam(req, 'id', 'phone_number_not_found'));
        return json(200, { message: 'Phone number released successfully.' });
      },
    },
    {
      method: 'GET',
      path: '/api/user/assistants/phone-numbers',
      auth: 'user',
      tag,
      summary: 'Numbers an assistant can use (a plain array); inbound leaves out caller IDs and taken numbers',
      querySchema: assignableQuerySchema.schema,
      responses: { 200: body(array(assignableNumber, 'The numbers (a plain array)')) },
      async handler(req) {
        const { type } = assignableQuerySchema(req.query);
        return json(200, await numbers.assignable(userId(req), type));
      },
    },
  ];
}
