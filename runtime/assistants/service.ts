import { ForeignKeyIntegrityConstraintViolationError, UniqueIntegrityConstraintViolationError, type CommonQueryMethods, type DatabasePool } from 'slonik';
import type { AssistantInput } from '../../schemas/assistants.js';
import type { CatalogService } from '../catalog/service.js';
import { PlatformError, ValidationError, type FieldErrors } from '../errors.js';
import type { Logger } from '../logger.js';
import { refusedDestinationMessage, type DestinationCheck } from '../net/outbound.js';
import {
  SETTING_COLUMNS,
  deleteAssistant,
  findAssistant,
  findAssistantForUpdate,
  findOwnedPhoneNumber,
  inboundAssistantOfNumber,
  insertAssistant,
  knowledgebaseOwned,
  findAssistantView,
  listAssistantViews,
  ownedToolIds,
  replaceAssistantTools,
  setWebhook,
  updateAssistant,
  type AssistantRow,
  type AssistantSettings,
  type AssistantViewRow,
} from './repository.js';
import { cancelPendingDeliveries, retargetPendingDeliveries } from '../webhooks/repository.js';
import { pauseCampaignsOfAssistant } from '../campaigns/repository.js';
import { checkOwnership, checkSettings, fillProviders, resetForMode, settingDefaults } from './rules.js';

const VALIDATION_FAILED = 'Validation failed';

/** What create and update answer: spec 4.4's five fields and the `uuid` conversations, web calls and the widget name it by. */
export interface AssistantSummary {
  id: number;
  uuid: string;
  name: string;
  status: AssistantRow['status'];
  type: AssistantRow['type'];
  mode: AssistantRow['mode'];
}

/** The full read shape: every field of spec 2.5 with its current value, plus identity and timestamps. */
export type AssistantView = AssistantViewRow;

function summary(row: Pick<AssistantRow, 'id' | 'uuid' | 'name' | 'status' | 'type' | 'mode'>): AssistantSummary {
  return { id: row.id, uuid: row.uuid, name: row.name, status: row.status, type: row.type, mode: row.mode };
}


function settingsOf(row: AssistantRow): AssistantSettings {
  const settings = { tool_ids: row.tool_ids } as Record<string, unknown>;
  for (const column of SETTING_COLUMNS) settings[column] = row[column];
  return settings as unknown as AssistantSettings;
}

function merge(base: AssistantSettings, input: Partial<AssistantInput>): AssistantSettings {
  const merged = { ...base } as Record<string, unknown>;
  for (const [key, value] of Object.entries(input)) if (value !== undefined) merged[key] = value;
  return merged as unknown as AssistantSettings;
}

/** Foreign keys of an assistant's write, by constraint: the field and its message when the row referred to is gone. */
const REFERENCES: Readonly<Record<string, readonly [string, string]>> = {
  assistants_phone_number_id_fkey: ['phone_number_id', 'The selected phone number id is invalid.'],
  assistants_knowledgebase_id_fkey: ['knowledgebase_id', 'The selected knowledgebase id is invalid.'],
  assistant_tools_tool_id_fkey: ['tool_ids', 'The selected tool ids are invalid.'],
};

export function createAssistantService({ pool, catalog, logger, refusesDestination }: { pool: DatabasePool; catalog: CatalogService; logger: Logger; refusesDestination: DestinationCheck }) {
  /**
   * A webhook URL the outbound guard would refuse, as field errors. Asked before a transaction
   * opens: the resolver may take up to its bound, and no row stays locked meanwhile.
   */
  async function webhookUrlErrors(url: string | null | undefined): Promise<FieldErrors> {
    return url && (await refusesDestination(url)) ? { webhook_url: [refusedDestinationMessage('webhook url')] } : {};
  }

  /** Checks everything and throws the 422 of spec 4.4 with every failing field at once (`found` included). */
  async function validate(tx: CommonQueryMethods, userId: number, settings: AssistantSettings, selfId: number | null, found: FieldErrors): Promise<void> {
    const errors: FieldErrors = checkSettings(await catalog.get(), settings);
    for (const [field, messages] of Object.entries(found)) (errors[field] ??= []).push(...messages);
    const phoneNumber = settings.phone_number_id === null ? null : await findOwnedPhoneNumber(tx, userId, settings.phone_number_id);
    const ownership = checkOwnership(settings, {
      toolIds: await ownedToolIds(tx, userId, settings.tool_ids),
      knowledgebase: settings.knowledgebase_id === null ? false : await knowledgebaseOwned(tx, userId, settings.knowledgebase_id),
      phoneNumber,
      phoneNumberTakenBy: phoneNumber && settings.type === 'inbound' ? await inboundAssistantOfNumber(tx, phoneNumber.id, selfId) : null,
    });
    for (const [field, messages] of Object.entries(ownership)) (errors[field] ??= []).push(...messages);
    if (Object.keys(errors).length > 0) throw new ValidationError(errors, VALIDATION_FAILED);
  }

  /** Two requests racing for one inbound number: the unique index decides, and the loser gets rule 5's 422. */
  function numberTaken(error: unknown): never {
    if (error instanceof UniqueIntegrityConstraintViolationError && error.constraint === 'assistants_inbound_number_key') {
      throw new ValidationError({ phone_number_id: ['The phone number is already assigned to another inbound assistant.'] }, VALIDATION_FAILED);
    }
    // A number, knowledgebase or tool checked a moment ago was deleted before the write: as if it had never been there.
    const gone = error instanceof ForeignKeyIntegrityConstraintViolationError && error.constraint ? REFERENCES[error.constraint] : undefined;
    if (gone) throw new ValidationError({ [gone[0]]: [gone[1]] }, VALIDATION_FAILED);
    throw error;
  }

  return {
    async create(userId: number, input: Partial<AssistantInput> & Pick<AssistantInput, 'mode' | 'voice_id' | 'language_id'>): Promise<AssistantSummary> {
      const defaults = { ...settingDefaults, llm_model_id: null, multimodal_model_id: null, synthesizer_provider_id: null, transcriber_provider_id: null };
      const settings = fillProviders(await catalog.get(), merge(defaults as unknown as AssistantSettings, input));
      const refused = await webhookUrlErrors(settings.webhook_url);
      const row = await pool
        .transaction(async (tx) => {
          await validate(tx, userId, settings, null, refused);
          const id = await insertAssistant(tx, userId, settings);
          await replaceAssistantTools(tx, id, settings.tool_ids);
          return findAssistant(tx, userId, id);
        })
        .catch(numberTaken);
      logger.info({ userId, assistantId: row!.id }, 'assistant created');
      return summary(row!);
    },

    /**
     * Only given fields change; arrays and `variables` replace; null clears a nullable field (a
     * null provider is chosen again from voice and language). A mode change resets the
     * mode-specific settings. `read` validates the body after the assistant is found.
     */
    async update(userId: number, id: number, read: () => Partial<AssistantInput>): Promise<AssistantSummary> {
      const current = await catalog.get();
      if (!(await findAssistant(pool, userId, id))) throw new PlatformError('assistant_not_found');
      const input = read();
      const refused = await webhookUrlErrors(input.webhook_url);
      const row = await pool
        .transaction(async (tx) => {
          const stored = await findAssistantForUpdate(tx, userId, id);
          if (!stored) throw new PlatformError('assistant_not_found');
          let settings = merge(settingsOf(stored), input);
          if (input.mode !== undefined && input.mode !== stored.mode) settings = resetForMode(current, settings, input);
          settings = fillProviders(current, settings);
          await validate(tx, userId, settings, id, refused);
          await updateAssistant(tx, userId, id, settings);
          if (input.tool_ids !== undefined) await replaceAssistantTools(tx, id, settings.tool_ids);
          // Turning the webhook off here stops it as the disable operation does; a new URL gets the retries.
          if (!settings.is_webhook_active || settings.webhook_url === null) await cancelPendingDeliveries(tx, userId, id);
          else if (settings.webhook_url !== stored.webhook_url) await retargetPendingDeliveries(tx, userId, id, settings.webhook_url);
          return findAssistant(tx, userId, id);
        })
        .catch(numberTaken);
      logger.info({ userId, assistantId: id }, 'assistant updated');
      return summary(row!);
    },

    async get(userId: number, id: number): Promise<AssistantView> {
      const view = await findAssistantView(pool, userId, id);
      if (!view) throw new PlatformError('assistant_not_found');
      return view;
    },

    async list(userId: number): Promise<readonly AssistantView[]> {
      return listAssistantViews(pool, userId);
    },

    /** Its running campaigns are paused (status_reason `assistant_deleted`) in the same transaction. */
    async remove(userId: number, id: number): Promise<void> {
      const paused = await pool.transaction(async (tx) => {
        const count = await pauseCampaignsOfAssistant(tx, userId, id);
        if (!(await deleteAssistant(tx, userId, id))) throw new PlatformError('assistant_not_found');
        return count;
      });
      logger.info({ userId, assistantId: id, pausedCampaigns: paused }, 'assistant deleted');
    },

    /** Stops webhook POSTs: `is_webhook_active` false, `webhook_url` null, pending deliveries cancelled. */
    async disableWebhook(userId: number, id: number): Promise<void> {
      await pool.transaction(async (tx) => {
        if (!(await setWebhook(tx, userId, id, null))) throw new PlatformError('assistant_not_found');
        await cancelPendingDeliveries(tx, userId, id);
      });
    },

    /** @throws PlatformError `assistant_not_found`; ValidationError (422) when the outbound guard refuses the URL. */
    async enableWebhook(userId: number, id: number, url: string): Promise<void> {
      if (!(await findAssistant(pool, userId, id))) throw new PlatformError('assistant_not_found');
      const refused = await webhookUrlErrors(url);
      if (refused.webhook_url) throw new ValidationError(refused, 'The given data was invalid.');
      if (!(await setWebhook(pool, userId, id, url))) throw new PlatformError('assistant_not_found');
    },
  };
}

export type AssistantService = ReturnType<typeof createAssistantService>;
