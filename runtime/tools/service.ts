import type { DatabasePool } from 'slonik';
import type { ToolInput } from '../../schemas/tools.js';
import { PlatformError, ValidationError } from '../errors.js';
import type { Logger } from '../logger.js';
import { refusedDestinationMessage, type DestinationCheck } from '../net/outbound.js';
import { plans } from '../plans.js';
import { deleteTool, findTool, insertTool, listTools, lockUserPlan, updateTool, type ToolRow } from './repository.js';

export function createToolService({ pool, logger, refusesDestination }: { pool: DatabasePool; logger: Logger; refusesDestination: DestinationCheck }) {
  /** An endpoint the outbound guard would refuse is a 422 on `endpoint`, before anything is stored. */
  async function checkEndpoint(endpoint: string | undefined, summary?: string): Promise<void> {
    if (endpoint !== undefined && (await refusesDestination(endpoint))) throw ValidationError.field('endpoint', refusedDestinationMessage('endpoint'), summary);
  }

  return {
    /**
     * @throws ValidationError (422) when the endpoint is one the outbound guard refuses;
     *   PlatformError `tool_limit_reached` (403) when the plan's number of tools is reached.
     */
    async create(userId: number, input: ToolInput): Promise<ToolRow> {
      await checkEndpoint(input.endpoint);
      const tool = await pool.transaction(async (tx) => {
        const { plan, tools } = await lockUserPlan(tx, userId);
        const limit = plans[plan].midCallTools;
        if (tools >= limit) {
          throw new PlatformError('tool_limit_reached', {
            message: `You have reached the maximum of ${limit} mid-call tools allowed on your plan. Please upgrade your plan to create more.`,
          });
        }
        return insertTool(tx, userId, input);
      });
      logger.info({ userId, toolId: tool.id }, 'tool created');
      return tool;
    },

    list(userId: number): Promise<readonly ToolRow[]> {
      return listTools(pool, userId);
    },

    async get(userId: number, id: number): Promise<ToolRow> {
      const tool = await findTool(pool, userId, id);
      if (!tool) throw new PlatformError('tool_not_found');
      return tool;
    },

    /** `input` is read after the tool is found, so another user's tool is 404 before any 422. */
    async update(userId: number, id: number, input: () => Partial<ToolInput>): Promise<ToolRow> {
      if (!(await findTool(pool, userId, id))) throw new PlatformError('tool_not_found');
      const changes = input();
      await checkEndpoint(changes.endpoint, 'Validation failed');
      const tool = await updateTool(pool, userId, id, changes);
      if (!tool) throw new PlatformError('tool_not_found');
      return tool;
    },

    /** Deletes the tool and detaches it from every assistant (cascade on assistant_tools). */
    async remove(userId: number, id: number): Promise<void> {
      if (!(await deleteTool(pool, userId, id))) throw new PlatformError('tool_not_found');
      logger.info({ userId, toolId: id }, 'tool deleted');
    },
  };
}

export type ToolService = ReturnType<typeof createToolService>;
