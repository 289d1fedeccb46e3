import { createLogger } from '../runtime/logger.js';
import { configOrExit, serve } from './serve.js';

/**
 * Entry point: read the configuration and run one server process (WORKERS=1), or a supervisor
 * that runs the database and WORKERS server processes on one port (api/supervisor.ts). Either
 * stops in order on SIGTERM or SIGINT; a second signal hurries the stop, a third exits at once.
 */

const config = configOrExit();
const logger = createLogger(config.logLevel);
if (config.workers > 1) await (await import('./supervisor.js')).supervise(config, logger);
else await serve(config, logger);
