import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import uWS from 'uWebSockets.js';
import { PlatformError, StartupError } from '../../runtime/errors.js';
import type { Logger } from '../../runtime/logger.js';
import type { Principal } from '../../runtime/auth/service.js';
import { parseJson, parseMultipart, parseQuery } from './body.js';
import { REFUSED_BODY_DRAIN, type BodyDrain, type DrainBound } from './refusal.js';
import { drainBody, refuseDuringBody, streamBody, write, type Ending, type Exchange } from './respond.js';
import { clientAddress } from './params.js';
import { errorResponse } from './errors.js';
import type { Router } from './router.js';
import { StreamBody, type ApiRequest, type ApiResponse, type RouteDefinition, type UploadedFile } from './types.js';

/**
 * The transport: one uWS app for REST and sockets. A request is copied out of uWS synchronously,
 * its body read with limits, routed, authenticated and handed to a handler that knows nothing of
 * uWS; the handler's plain response is written back inside `cork` unless the client went away.
 */

/** What the server routes to: given at creation, or once the runtime has started (`serve`). */
export interface Routing {
  readonly router: Router;
  /** Resolves a bearer token to a user, or undefined when it is unknown, expired or revoked. */
  readonly authenticate: (token: string) => Promise<Principal | undefined>;
  /** Checks the operator token; absent when admin operations are disabled. */
  readonly authenticateAdmin?: (token: string) => boolean;
  /** Called once per answered request (metrics). */
  readonly onResponse?: (route: string, method: string, status: number, seconds: number) => void;
  /** Registers socket routes (they take precedence over the HTTP catch-all whenever they are added). */
  readonly sockets?: (app: uWS.TemplatedApp) => void;
}

export interface HttpServerOptions extends Partial<Routing> {
  readonly logger: Logger;
  readonly jsonBodyLimit: number;
  /** Proxies whose X-Forwarded-For is believed for the client address (`TRUST_PROXY`). */
  readonly trustProxy?: number;
  readonly multipartBodyLimit: number;
  /** How much of a refused body is still read after its answer. @defaultValue REFUSED_BODY_DRAIN */
  readonly refusedBodyDrain?: DrainBound;
}

export interface HttpServer {
  readonly app: uWS.TemplatedApp;
  /**
   * Binds the port exclusively (a second server on it fails here, instead of sharing its
   * connections); `shared`: beside the sibling server processes a supervisor started on it (the
   * kernel spreads the connections among them), the supervisor having checked the port is free.
   * Until `serve`, when no routing was given at creation, every request is 503.
   * @throws PortInUseError when the port cannot be bound.
   */
  listen(host: string, port: number, options?: { readonly shared?: boolean }): Promise<number>;
  /** Starts routing requests (the runtime is up). */
  serve(routing: Routing): void;
  /**
   * The first step of a stop: requests are answered 503 with `Retry-After`, but for routes marked
   * `duringStop` (carrier callbacks of live calls, health, which says it is stopping).
   */
  drain(): void;
  /** Stops accepting, then waits (up to `graceMs`) for in-flight requests to finish, then closes every connection. */
  close(graceMs?: number): Promise<void>;
}

/** The port could not be bound; the message says why, in one line. */
export class PortInUseError extends StartupError {
  override readonly name = 'PortInUseError';
}

/** A 503 while the server is starting or stopping: the client tries again shortly. */
const UNAVAILABLE_RETRY_S = '5';

const PREFLIGHT_HEADERS: Readonly<Record<string, string>> = {
  'Access-Control-Allow-Methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
  'Access-Control-Allow-Headers': 'Authorization, Content-Type, X-Request-Id, Accept',
  'Access-Control-Max-Age': '600',
};

const TOO_LARGE: ApiResponse = { status: 413, body: { message: 'The request body is too large.' } };
const SINGLE_HEADERS = new Set(['content-length', 'transfer-encoding', 'authorization', 'content-type', 'host']);
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Why uWS could not bind (it says only that it could not): the same bind tried with Node's own
 * server reports the operating system's reason, in one line for the operator.
 */
async function bindFailure(host: string, port: number): Promise<PortInUseError> {
  return probePort(host, port).then(
    () => new PortInUseError(`Cannot listen on ${host}:${port}: the port is in use by another server. Stop what holds it or set PORT (or HOST) to another one.`),
    (error: PortInUseError) => error,
  );
}

/**
 * Binds the port with Node's own server and lets it go: resolves with the port (the one picked
 * when 0 was asked for), or rejects with a PortInUseError saying in one line why it cannot be bound.
 */
export function probePort(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      const reason = error.code === 'EADDRINUSE' ? 'the port is in use by another program (or another server of this platform)' : error.code === 'EACCES' ? 'permission denied (ports below 1024 need privileges)' : error.code === 'EADDRNOTAVAIL' ? 'no interface has that address' : (error.code ?? error.message);
      reject(new PortInUseError(`Cannot listen on ${host}:${port}: ${reason}. Stop what holds it or set PORT (or HOST) to another one.`));
    });
    probe.listen({ host, port, exclusive: true }, () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === 'object' && address ? address.port : port));
    });
  });
}

function bearer(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const { logger } = options;
  const drainBound = options.refusedBodyDrain ?? REFUSED_BODY_DRAIN;
  const app = uWS.App();
  let listenSocket: uWS.us_listen_socket | undefined;
  let inFlight = 0;
  let drained: (() => void) | undefined;
  let routing: Routing | undefined;
  let stopping = false;

  function serve(given: Routing): void {
    given.sockets?.(app);
    routing = given;
  }
  if (options.router && options.authenticate) serve({ ...options, router: options.router, authenticate: options.authenticate });

  app.any('/*', (res, req) => {
    const started = performance.now();
    const exchange: Exchange = { aborted: false, res };
    // Set once the request counts as in flight; the body reader and the handler release it.
    let release: (() => void) | undefined;
    let dispatched = false;
    res.onAborted(() => {
      exchange.aborted = true;
      exchange.onAbort?.();
      // A body that will never finish arriving has no handler to release it.
      if (!dispatched) release?.();
    });

    const method = req.getMethod().toUpperCase();
    const path = req.getUrl();
    const rawQuery = req.getQuery() ?? '';
    const headers: Record<string, string> = {};
    let conflicting = false;
    req.forEach((name, value) => {
      // Two framing or credential headers that uWS and this code could read differently (RFC 9112).
      if (SINGLE_HEADERS.has(name) && name in headers && headers[name] !== value) conflicting = true;
      headers[name] = value;
    });
    const ip = clientAddress(Buffer.from(res.getRemoteAddressAsText()).toString(), headers['x-forwarded-for'], options.trustProxy ?? 0);
    const incomingId = headers['x-request-id'];
    const requestId = incomingId && REQUEST_ID.test(incomingId) ? incomingId : randomUUID();
    const log = logger.child({ reqId: requestId });

    const finish = (response: ApiResponse, route: RouteDefinition | undefined, principal?: Principal, ending: Ending = 'reuse'): void => {
      const onResponse = routing?.onResponse;
      // Neither may reject unheard: an unhandled rejection ends the process, every call in it.
      if (response.body instanceof StreamBody) streamBody(exchange, requestId, response, response.body, log).catch((error: unknown) => log.error({ err: error }, 'a streamed response failed'));
      else if (ending === 'drain') refuseDuringBody(exchange, requestId, response, drainBound);
      else write(exchange, requestId, response, ending === 'close');
      onResponse?.(route?.path ?? 'unmatched', method, response.status, (performance.now() - started) / 1000);
      log.info(
        {
          method,
          path,
          route: route?.path,
          status: response.status,
          ms: Math.round((performance.now() - started) * 100) / 100,
          userId: principal?.userId,
          aborted: exchange.aborted || undefined,
        },
        'request',
      );
    };

    if (conflicting) {
      finish({ status: 400, body: { message: 'The request repeats a header that may appear once.' } }, undefined, undefined, 'close');
      return;
    }

    if (method === 'OPTIONS') {
      finish({ status: 204, headers: PREFLIGHT_HEADERS }, undefined);
      return;
    }

    // Starting or stopping: 503, and the connection closes (after the body, if one is coming), so
    // the client's retry may reach another process.
    const unavailable = (route: RouteDefinition | undefined, message?: string): void => {
      const bodyComing = BODY_METHODS.has(method) && (Number(headers['content-length'] ?? 0) > 0 || headers['transfer-encoding'] !== undefined);
      finish(errorResponse(new PlatformError('shutting_down', { message, headers: { 'Retry-After': UNAVAILABLE_RETRY_S } }), route, log), route, undefined, bodyComing ? 'drain' : 'close');
      if (bodyComing) drainBody(exchange);
    };
    if (!routing) {
      unavailable(undefined, 'The server is starting. Please try again in a moment.');
      return;
    }
    const { router, authenticate, authenticateAdmin } = routing;
    const match = router.match(method, path);
    if (match.kind === 'not_found') {
      finish({ status: 404, body: { message: 'Not found.' } }, undefined);
      return;
    }
    if (match.kind === 'method_not_allowed') {
      finish({ status: 405, body: { message: 'Method not allowed.' }, headers: { Allow: match.allowed.join(', ') } }, undefined);
      return;
    }
    const { route, params } = match;
    if (stopping && !route.duringStop) {
      unavailable(route);
      return;
    }

    const contentType = headers['content-type'] ?? '';
    const isMultipart = contentType.toLowerCase().startsWith('multipart/form-data');
    const limit = (isMultipart && route.multipart) || route.largeBody ? options.multipartBodyLimit : options.jsonBodyLimit;
    const declaredLength = headers['content-length'] !== undefined ? Number(headers['content-length']) : undefined;
    const hasBody = BODY_METHODS.has(method) && ((declaredLength ?? 0) > 0 || headers['transfer-encoding'] !== undefined);
    const needsUser = route.auth === 'user' || (route.auth === 'optional' && headers.authorization !== undefined);
    const token = bearer(headers.authorization);

    // Without a token there is nothing to check it against: 401 before any body is read, and a
    // body on its way is read and thrown away, so no upload is buffered for an anonymous caller.
    const anonymous = (needsUser || route.auth === 'admin') && !token;
    if (anonymous || (route.auth === 'admin' && !(token && authenticateAdmin?.(token)))) {
      finish(errorResponse(new PlatformError('unauthenticated'), route, log), route, undefined, hasBody ? 'drain' : 'reuse');
      if (hasBody) drainBody(exchange);
      return;
    }
    if (declaredLength !== undefined && declaredLength > limit) {
      finish(route.tooLarge ?? TOO_LARGE, route, undefined, 'drain');
      drainBody(exchange);
      return;
    }

    // The token is checked while the body arrives; a caller it does not name gets 401 at once and
    // the rest of the upload is not kept (below). Only asked once the request will be served: a
    // lookup no one waits for would end the process if it failed (an unhandled rejection).
    const authenticated = needsUser && token ? authenticate(token) : Promise.resolve(undefined);

    inFlight++;
    let released = false;
    const done = (): void => {
      if (released) return;
      released = true;
      inFlight--;
      if (inFlight === 0) drained?.();
    };
    release = done;

    const dispatch = (rawBody: Buffer): void => {
      dispatched = true;
      handle(rawBody)
        .catch((error: unknown) => log.error({ err: error }, 'a response could not be written'))
        .finally(done);
    };

    const handle = async (rawBody: Buffer): Promise<void> => {
      let principal: Principal | undefined;
      try {
        // The caller is known before the body is looked at: a bad token is 401 whatever the body.
        if (needsUser) {
          principal = await authenticated;
          if (!principal) throw new PlatformError('unauthenticated');
        }

        let body: unknown = {};
        let files: Record<string, UploadedFile> = {};
        if (rawBody.length > 0) {
          if (isMultipart) {
            if (!route.multipart) throw new PlatformError('unsupported_media_type', { message: 'This operation does not accept multipart bodies.' });
            const parsed = parseMultipart(rawBody, contentType);
            body = parsed.fields;
            files = parsed.files;
          } else if (contentType.toLowerCase().startsWith('application/x-www-form-urlencoded')) {
            body = parseQuery(rawBody.toString('utf8'));
          } else {
            body = parseJson(rawBody);
          }
        }

        const request: ApiRequest = {
          id: requestId,
          method,
          path,
          params,
          // An empty parameter (`?status=`, a blank filter in a form) is one not given.
          query: Object.fromEntries(Object.entries(parseQuery(rawQuery)).filter(([, value]) => value !== '')),
          rawQuery,
          headers,
          ip,
          rawBody,
          body,
          files,
          principal,
          log,
        };
        const response = await route.handler(request);
        finish(response, route, principal);
      } catch (error) {
        finish(errorResponse(error, route, log), route, principal);
      }
    };

    if (!hasBody) {
      dispatch(Buffer.alloc(0));
      return;
    }

    // Chunks are only valid during the callback: copy each into one buffer, sized up front from
    // the declared length up to 1 MiB (a declared length is only a claim) and grown as data comes.
    let buffer = Buffer.allocUnsafe(Math.min(declaredLength ?? 64 * 1024, 1024 * 1024));
    let length = 0;
    if (needsUser) {
      authenticated.then(
        (principal) => {
          if (principal || exchange.drain || dispatched || exchange.aborted) return;
          finish(errorResponse(new PlatformError('unauthenticated'), route, log), route, undefined, 'drain');
          done();
        },
        () => undefined,
      );
    }
    res.onData((chunk, isLast) => {
      if (exchange.drain) {
        exchange.drain.take(chunk.byteLength, isLast);
        return;
      }
      const bytes = new Uint8Array(chunk);
      if (length + bytes.length > limit) {
        finish(route.tooLarge ?? TOO_LARGE, route, undefined, 'drain');
        done();
        // The chunk that crossed the limit may be the body's last (`finish` has set the drain).
        (exchange.drain as BodyDrain | undefined)?.take(0, isLast);
        return;
      }
      if (length + bytes.length > buffer.length) {
        const grown = Buffer.allocUnsafe(Math.min(limit, Math.max(buffer.length * 2, length + bytes.length)));
        buffer.copy(grown, 0, 0, length);
        buffer = grown;
      }
      buffer.set(bytes, length);
      length += bytes.length;
      if (isLast) dispatch(buffer.subarray(0, length));
    });
  });

  return {
    app,
    listen(host, port, listenOptions = {}) {
      return new Promise((resolveListen, reject) => {
        // Exclusive: without it uWS sets SO_REUSEPORT, and a second server on the port would take
        // half of the connections of the first (each with its own database). Shared, that is
        // what the sibling processes of one supervisor want.
        (app as uWS.TemplatedApp & { listen(host: string, port: number, options: number, cb: (socket: uWS.us_listen_socket | false) => void): uWS.TemplatedApp }).listen(
          host,
          port,
          listenOptions.shared ? 0 : (uWS as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT,
          (socket) => {
            if (!socket) {
              void bindFailure(host, port).then(reject);
              return;
            }
            listenSocket = socket;
            resolveListen(uWS.us_socket_local_port(socket));
          },
        );
      });
    },
    serve,
    drain() {
      stopping = true;
    },
    async close(graceMs = 10_000) {
      if (listenSocket) {
        uWS.us_listen_socket_close(listenSocket);
        listenSocket = undefined;
      }
      if (inFlight > 0) {
        await new Promise<void>((resolveDrain) => {
          const timer = setTimeout(resolveDrain, graceMs);
          drained = () => {
            clearTimeout(timer);
            resolveDrain();
          };
        });
      }
      // Closes idle keep-alive connections and sockets. Present in every uWS v20 build though
      // missing from this build's type declarations.
      (app as uWS.TemplatedApp & { close(): void }).close();
    },
  };
}
