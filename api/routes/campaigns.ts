import { ValidationError } from '../../runtime/errors.js';
import type { CampaignMove, CampaignService } from '../../runtime/campaigns/service.js';
import type { LeadSource } from '../../runtime/campaigns/leads.js';
import {
  addLeadsSchema,
  campaignResponse,
  createCampaignSchema,
  doNotCallResponse,
  doNotCallSchema,
  leadResponse,
  leadsAddedResponse,
  listCampaignsSchema,
  listDoNotCallSchema,
  listLeadsSchema,
  updateCampaignSchema,
} from '../../schemas/campaigns.js';
import { FILE_TOO_LARGE, MAX_UPLOAD_BYTES } from '../../schemas/knowledge.js';
import { DEFAULT_PER_PAGE } from '../../schemas/pagination.js';
import { dataOf, message, messageWith, paginated } from '../../schemas/shapes.js';
import { body } from '../http/contract.js';
import { paginate } from '../http/pagination.js';
import { idParam, userId } from '../http/params.js';
import { json, type ApiRequest, type RouteDefinition } from '../http/types.js';

const tag = 'Campaigns';

/** The leads of a request: a CSV file (multipart, field `file`) or the JSON list `leads`. */
function leadSource(req: ApiRequest): LeadSource {
  const file = req.files.file;
  if (file) {
    if (file.data.length > MAX_UPLOAD_BYTES) throw ValidationError.field('file', FILE_TOO_LARGE);
    return { kind: 'csv', data: file.data };
  }
  if ((req.headers['content-type'] ?? '').toLowerCase().startsWith('multipart/form-data')) throw ValidationError.field('file', 'A CSV file is required in the field file.');
  const { leads } = addLeadsSchema(req.body);
  if (!leads) throw ValidationError.field('leads', 'The leads field is required when no file is sent.');
  return { kind: 'json', leads };
}

const MOVE_ROUTES: ReadonlyArray<{ move: CampaignMove; summary: string; message: string }> = [
  { move: 'start', summary: 'Start dialling a draft campaign (422 without a lead to call, or when its assistant is not outbound with a usable number)', message: 'Campaign started' },
  { move: 'pause', summary: 'Pause a running campaign: no new call starts, live calls finish', message: 'Campaign paused' },
  { move: 'resume', summary: 'Resume a paused campaign (422 when its assistant cannot dial)', message: 'Campaign resumed' },
  { move: 'cancel', summary: 'Cancel a running or paused campaign: its leads still to be called become cancelled, live calls finish', message: 'Campaign cancelled' },
];

function campaignRoutes(campaigns: CampaignService, publicUrl: () => string): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/campaigns',
      auth: 'user',
      tag,
      summary: 'Create a campaign (status draft) that an outbound assistant of yours dials',
      requestSchema: createCampaignSchema.schema,
      responses: { 201: body(messageWith(campaignResponse, 'The new campaign')) },
      async handler(req) {
        const data = await campaigns.create(userId(req), createCampaignSchema(req.body));
        return json(201, { message: 'Campaign created successfully', data });
      },
    },
    {
      method: 'GET',
      path: '/api/user/campaigns',
      auth: 'user',
      tag,
      summary: 'Your campaigns, newest first, with their lead counts, paginated',
      querySchema: listCampaignsSchema.schema,
      responses: { 200: body(paginated(campaignResponse, 'A page of campaigns')) },
      async handler(req) {
        const query = listCampaignsSchema(req.query);
        const page = await campaigns.list(userId(req), query.status, query.page ?? 1, query.per_page ?? DEFAULT_PER_PAGE);
        return json(200, paginate(page, publicUrl(), req.path, req.rawQuery));
      },
    },
    {
      method: 'GET',
      path: '/api/user/campaigns/:id',
      auth: 'user',
      tag,
      summary: 'A campaign with its settings, status and lead counts',
      responses: { 200: body(dataOf(campaignResponse, 'The campaign')) },
      async handler(req) {
        return json(200, { data: await campaigns.get(userId(req), idParam(req, 'id', 'campaign_not_found')) });
      },
    },
    {
      method: 'PUT',
      path: '/api/user/campaigns/:id',
      auth: 'user',
      tag,
      summary: 'Update a campaign: given fields replace (schedule, retry_on and variables whole), in any status; a running campaign dials with the new settings',
      requestSchema: updateCampaignSchema.schema,
      responses: { 200: body(messageWith(campaignResponse, 'The updated campaign')) },
      async handler(req) {
        const id = idParam(req, 'id', 'campaign_not_found');
        const data = await campaigns.update(userId(req), id, () => updateCampaignSchema(req.body));
        return json(200, { message: 'Campaign updated successfully', data });
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/campaigns/:id',
      auth: 'user',
      tag,
      summary: 'Delete a campaign and its leads (422 while running: pause or cancel it first); its calls stay, without the campaign',
      errors: [422],
      responses: { 200: body(message('Deleted')) },
      async handler(req) {
        await campaigns.remove(userId(req), idParam(req, 'id', 'campaign_not_found'));
        return json(200, { message: 'Campaign deleted successfully' });
      },
    },
    ...MOVE_ROUTES.map(
      ({ move, summary, message: done }): RouteDefinition => ({
        method: 'POST',
        path: `/api/user/campaigns/:id/${move}`,
        auth: 'user',
        tag,
        summary: `${summary}. Moves: draft→running (start), running→paused (pause), paused→running (resume), running|paused→cancelled (cancel); any other is 422`,
        errors: [422],
        responses: { 200: body(messageWith(campaignResponse, 'The campaign after the move')) },
        async handler(req) {
          const data = await campaigns.move(userId(req), idParam(req, 'id', 'campaign_not_found'), move);
          return json(200, { message: done, data });
        },
      }),
    ),
  ];
}

function leadRoutes(campaigns: CampaignService, publicUrl: () => string): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/campaigns/:id/leads',
      auth: 'user',
      multipart: true,
      largeBody: true,
      // The body limit is the file's, with a little room for the other fields: over it, the file is.
      tooLarge: { status: 422, body: { message: FILE_TOO_LARGE, errors: { file: [FILE_TOO_LARGE] } } },
      tag,
      summary:
        'Add leads to a draft, running or paused campaign: JSON {leads: [{phone_number, variables?}]} or multipart/form-data with a CSV file in `file` (RFC 4180, UTF-8; a phone_number column, every other column a variable named by its header; comma, semicolon or tab; at most 20 MB and 100,000 rows). Bad rows are reported by line and the rest kept; numbers the campaign has are skipped; numbers on your do-not-call list are added as do-not-call',
      requestSchema: addLeadsSchema.schema,
      responses: { 200: body(messageWith(leadsAddedResponse, 'What was added, skipped and refused')) },
      async handler(req) {
        const id = idParam(req, 'id', 'campaign_not_found');
        const data = await campaigns.addLeads(userId(req), id, () => leadSource(req));
        return json(200, { message: `${data.added} lead${data.added === 1 ? '' : 's'} added`, data });
      },
    },
    {
      method: 'GET',
      path: '/api/user/campaigns/:id/leads',
      auth: 'user',
      tag,
      summary: "A campaign's leads in the order they were added, paginated, optionally by status",
      querySchema: listLeadsSchema.schema,
      responses: { 200: body(paginated(leadResponse, 'A page of leads')) },
      async handler(req) {
        const id = idParam(req, 'id', 'campaign_not_found');
        const query = listLeadsSchema(req.query);
        const page = await campaigns.leads(userId(req), id, query.status, query.page ?? 1, query.per_page ?? DEFAULT_PER_PAGE);
        return json(200, paginate(page, publicUrl(), req.path, req.rawQuery));
      },
    },
  ];
}

function doNotCallRoutes(campaigns: CampaignService, publicUrl: () => string): RouteDefinition[] {
  return [
    {
      method: 'POST',
      path: '/api/user/do-not-call',
      auth: 'user',
      tag,
      summary: "Put a number on your do-not-call list: no campaign of yours dials it, and your leads with it still to be called become do-not-call (201; 200 when it was on the list already)",
      requestSchema: doNotCallSchema.schema,
      responses: { 201: body(messageWith(doNotCallResponse, 'The number, now on the list')), 200: body(messageWith(doNotCallResponse, 'The number, on the list already')) },
      async handler(req) {
        const { phone_number } = doNotCallSchema(req.body);
        const { entry, created, leads } = await campaigns.addDoNotCall(userId(req), phone_number);
        const marked = leads === 0 ? '' : ` ${leads} lead${leads === 1 ? '' : 's'} will not be called.`;
        return json(created ? 201 : 200, { message: `${created ? 'Number added to the do-not-call list.' : 'The number is on the do-not-call list already.'}${marked}`, data: entry });
      },
    },
    {
      method: 'GET',
      path: '/api/user/do-not-call',
      auth: 'user',
      tag,
      summary: 'Your do-not-call list, newest first, paginated',
      querySchema: listDoNotCallSchema.schema,
      responses: { 200: body(paginated(doNotCallResponse, 'A page of the list')) },
      async handler(req) {
        const query = listDoNotCallSchema(req.query);
        const page = await campaigns.listDoNotCall(userId(req), query.page ?? 1, query.per_page ?? DEFAULT_PER_PAGE);
        return json(200, paginate(page, publicUrl(), req.path, req.rawQuery));
      },
    },
    {
      method: 'DELETE',
      path: '/api/user/do-not-call/:phoneNumber',
      auth: 'user',
      tag,
      summary: 'Take a number off your do-not-call list (leads already marked do-not-call stay so); 404 when it is not on it',
      responses: { 200: body(message('Removed')) },
      async handler(req) {
        await campaigns.removeDoNotCall(userId(req), req.params.phoneNumber ?? '');
        return json(200, { message: 'Number removed from the do-not-call list.' });
      },
    },
  ];
}

/** Outbound campaigns, their leads, and the do-not-call list. */
export function campaignsRoutes(campaigns: CampaignService, publicUrl: () => string): RouteDefinition[] {
  return [...campaignRoutes(campaigns, publicUrl), ...leadRoutes(campaigns, publicUrl), ...doNotCallRoutes(campaigns, publicUrl)];
}
