import { timingSafeEqual } from 'node:crypto';
import type { Config } from '../runtime/config.js';
import type { Logger } from '../runtime/logger.js';
import type { Runtime } from '../runtime/platform.js';
import type { Routing } from './http/server.js';
import { Router } from './http/router.js';
import { adminRoutes } from './routes/admin.js';
import { apiKeyRoutes } from './routes/apiKeys.js';
import { authRoutes } from './routes/auth.js';
import { healthRoutes } from './routes/health.js';
import { knowledgeRoutes } from './routes/knowledge.js';
import { toolRoutes } from './routes/tools.js';
import { catalogRoutes } from './routes/catalog.js';
import { assistantRoutes } from './routes/assistants.js';
import { phoneNumberRoutes } from './routes/phoneNumbers.js';
import { conversationRoutes } from './routes/conversations.js';
import { createRateLimiter } from '../runtime/rateLimit.js';
import { conversationSocket } from './sockets/conversation.js';
import { widgetRoutes } from './routes/widget.js';
import { callRoutes } from './routes/calls.js';
import { campaignsRoutes } from './routes/campaigns.js';
import { ledgerRoutes } from './routes/ledger.js';
import { webhookRoutes } from './routes/webhooks.js';
import { metricsRoutes } from './routes/metrics.js';
import { openApiDocument } from './openapi.js';
import { DOCS_PAGE } from './docsPage.js';
import { body, media } from './http/contract.js';
import { anyObject } from '../schemas/shapes.js';
import { telephonyRoutes } from './routes/telephony.js';
import { twilioRoutes } from './routes/carriers/twilio.js';
import { channelRoutes } from './routes/channels.js';
import { telnyxRoutes } from './routes/carriers/telnyx.js';
import { vonageRoutes } from './routes/carriers/vonage.js';
import { plivoRoutes } from './routes/carriers/plivo.js';
import { recordingRoutes } from './routes/recordings.js';
import { mediaSocket } from './sockets/media.js';
import { browserFormat } from '../runtime/voice/serializers/browser.js';

export interface AppDeps {
  readonly config: Config;
  readonly logger: Logger;
  readonly runtime: Runtime;
  /** `GET /metrics`'s exposition when not this process's own (a supervisor's server process: the machine's). */
  readonly scrapeMetrics?: () => Promise<string>;
}

/** The routes and sockets over a started runtime, for a server to serve. */
export function buildApp({ config, logger, runtime, scrapeMetrics }: AppDeps): { router: Router; routing: Routing } {
  const { services } = runtime;
  const router = new Router();
  const perIp = createRateLimiter(config.rateLimits.perIp);
  /** The operator's choice for carriers without a signing secret (refused unless ACCEPT_UNSIGNED_CARRIER_WEBHOOKS). */
  const acceptUnsigned = config.acceptUnsignedCarrierWebhooks;
  const twilioWebhooks = { authToken: config.twilioAuthToken, acceptUnsigned, publicUrl: () => runtime.publicUrl() };
  const perConversation = createRateLimiter(config.rateLimits.perConversation);
  const routes = [
    ...healthRoutes(() => runtime.health()),
    ...authRoutes(services.auth),
    ...apiKeyRoutes(services.apiKeys),
    ...knowledgeRoutes(services.knowledge),
    ...toolRoutes(services.tools),
    ...catalogRoutes(services.catalog, services.voicePreviews, () => runtime.publicUrl()),
    ...assistantRoutes(services.assistants),
    ...phoneNumberRoutes(services.phoneNumbers),
    ...conversationRoutes(services.conversations, { perIp, perConversation }, () => runtime.publicUrl()),
    ...widgetRoutes((uuid) => services.conversations.widgetOf(uuid)),
    ...callRoutes(services.calls, services.voice, () => runtime.publicUrl()),
    ...campaignsRoutes(services.campaigns, () => runtime.publicUrl()),
    ...ledgerRoutes(services.ledger, () => runtime.publicUrl()),
    ...telephonyRoutes(services.voice, { perIp }),
    ...twilioRoutes(services.voice, twilioWebhooks),
    ...channelRoutes(services.channels, twilioWebhooks),
    ...telnyxRoutes(services.voice, { publicKey: config.telnyxPublicKey, acceptUnsigned }),
    ...vonageRoutes(services.voice, { signatureSecret: config.vonageSignatureSecret, acceptUnsigned, applicationId: config.vonage?.applicationId }),
    ...plivoRoutes(services.voice, { authToken: config.plivoAuthToken, acceptUnsigned, publicUrl: () => runtime.publicUrl() }),
    ...webhookRoutes(services.webhooks),
    ...recordingRoutes(services.calls),
    ...metricsRoutes(scrapeMetrics ?? (() => runtime.metrics.registry.metrics()), config.metricsToken),
    ...(config.adminToken ? adminRoutes(services.admin) : []),
  ];
  for (const route of routes) router.add(route);
  let document: string | undefined;
  router.add({
    method: 'GET',
    path: '/api/openapi.json',
    auth: 'none',
    tag: 'Operations',
    summary: 'This OpenAPI 3.1 document, generated from the validation schemas',
    responses: { 200: body(anyObject('The OpenAPI 3.1 document')) },
    handler: () => {
      document ??= JSON.stringify(openApiDocument(router.routes(), runtime.publicUrl()));
      return { status: 200, body: document, headers: { 'Content-Type': 'application/json' } };
    },
  });
  router.add({
    method: 'GET',
    path: '/api/docs',
    auth: 'none',
    tag: 'Operations',
    summary: 'The API reference for people',
    responses: { 200: media('text/html', 'The reference page (it reads openapi.json)') },
    handler: () => ({ status: 200, body: DOCS_PAGE, headers: { 'Content-Type': 'text/html; charset=utf-8' } }),
  });

  const adminToken = config.adminToken ? Buffer.from(config.adminToken) : undefined;
  const routing: Routing = {
    router,
    authenticate: (token) => services.auth.authenticate(token),
    authenticateAdmin: adminToken
      ? (token) => {
          const given = Buffer.from(token);
          return given.length === adminToken.length && timingSafeEqual(given, adminToken);
        }
      : undefined,
    onResponse: (route, method, status, seconds) => runtime.metrics.observeRequest(route, method, status, seconds),
    sockets: (app) => {
      conversationSocket(app, {
        conversations: services.conversations,
        engine: services.conversationEngine,
        limits: { perIp, perConversation },
        trustProxy: config.trustProxy,
        logger,
        onCount: (delta) => runtime.metrics.socketOpened('widget', delta),
      });
      for (const format of services.voice.formats()) mediaSocket(app, format, { voice: services.voice, logger, onCount: (delta) => runtime.metrics.socketOpened('telephony', delta) });
      mediaSocket(app, browserFormat, { voice: services.voice, logger, onCount: (delta) => runtime.metrics.socketOpened('web_call', delta) });
    },
  };
  return { router, routing };
}
