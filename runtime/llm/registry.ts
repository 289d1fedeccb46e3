import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { createDevProvider } from './dev.js';
import { createOpenAiCompatibleProvider } from './openai.js';
import type { LlmProvider } from './types.js';

/**
 * Which provider serves a catalog model: the configured OpenAI-compatible server of its provider,
 * or `dev` when that provider is not configured (logged once per provider, never silently in place
 * of a configured one that fails).
 */
export function createLlmRegistry(config: Config, logger: Logger) {
  const providers = new Map<string, LlmProvider>();
  const dev = createDevProvider();
  const warned = new Set<string>();
  return {
    provider(name: string): LlmProvider {
      if (name === 'dev') return dev;
      let provider = providers.get(name);
      if (!provider) {
        const settings = config.llmProviders[name];
        if (!settings) {
          if (!warned.has(name)) {
            warned.add(name);
            logger.warn({ provider: name }, 'model provider not configured; the dev model answers instead');
          }
          return dev;
        }
        provider = createOpenAiCompatibleProvider({ name, baseUrl: settings.baseUrl, apiKey: settings.apiKey });
        providers.set(name, provider);
      }
      return provider;
    },
  };
}

export type LlmRegistry = ReturnType<typeof createLlmRegistry>;
