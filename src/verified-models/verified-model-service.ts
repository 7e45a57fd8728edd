import { UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { recordAudit, type AuditActor } from '../audit/audit-service.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { VerifiedModel } from './entities.ts';
import { toVerifiedModelView, type VerifiedModelView } from './mapper.ts';
import { deleteModel } from './queries.ts';

export type NewVerifiedModel = components['schemas']['VerifiedModelCreate'];
export type VerifiedModelPage = components['schemas']['VerifiedModelPage'];

/** `verified_models.id` is a PostgreSQL `integer`: a larger id names no model (and must not reach SQL). */
const MAX_ID = 2_147_483_647;

/** The admin-curated list of verified models. */
export class VerifiedModelService {
  constructor(private readonly em: EntityManager) {}

  /**
   * Adds a model. The contract has already trimmed and length-checked the names (`x-trim`);
   * `(provider, model_name)` must be new.
   */
  async create(actor: AuditActor, input: NewVerifiedModel): Promise<VerifiedModelView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        const model = em.create(VerifiedModel, {
          modelName: input.model_name,
          provider: input.provider,
          isEnabled: input.is_enabled ?? true,
        });
        await em.flush();
        await recordAudit(em, {
          actor,
          action: 'verified_model.created',
          targetType: 'verified_model',
          targetId: model.id,
          summary: { provider: model.provider, model_name: model.modelName, is_enabled: model.isEnabled },
        });
        return toVerifiedModelView(model);
      });
    } catch (error) {
      // The unique constraint, not a prior lookup, decides: two concurrent creates cannot both win.
      if (error instanceof UniqueConstraintViolationException) {
        throw new ConflictError('A verified model with this provider and model name already exists');
      }
      throw error;
    }
  }

  /** One page of models matching the filters, ordered by provider then model name. */
  async list(query: { provider?: string; isEnabled?: boolean; limit: number; offset: number }): Promise<VerifiedModelPage> {
    const [models, total] = await this.em.fork().findAndCount(
      VerifiedModel,
      {
        ...(query.provider !== undefined ? { provider: query.provider } : {}),
        ...(query.isEnabled !== undefined ? { isEnabled: query.isEnabled } : {}),
      },
      { orderBy: [{ provider: 'asc' }, { modelName: 'asc' }], limit: query.limit, offset: query.offset },
    );
    return { items: models.map(toVerifiedModelView), total, limit: query.limit, offset: query.offset };
  }

  /** Enables or disables a model; `updated_at` moves only when the value changes. */
  async setEnabled(actor: AuditActor, id: number, isEnabled: boolean): Promise<VerifiedModelView> {
    return this.em.fork().transactional(async (em) => {
      const model = id <= MAX_ID ? await em.findOne(VerifiedModel, { id }) : null;
      if (!model) throw new NotFoundError('Verified model not found');
      if (model.isEnabled !== isEnabled) {
        model.isEnabled = isEnabled;
        await em.flush();
        await recordAudit(em, {
          actor,
          action: 'verified_model.updated',
          targetType: 'verified_model',
          targetId: model.id,
          summary: { provider: model.provider, model_name: model.modelName, is_enabled: isEnabled },
        });
      }
      return toVerifiedModelView(model);
    });
  }

  /** Removes a model. */
  async delete(actor: AuditActor, id: number): Promise<void> {
    await this.em.fork().transactional(async (em) => {
      const deleted = id <= MAX_ID ? await deleteModel(em, id) : undefined;
      if (!deleted) throw new NotFoundError('Verified model not found');
      await recordAudit(em, {
        actor,
        action: 'verified_model.deleted',
        targetType: 'verified_model',
        targetId: id,
        summary: { provider: deleted.provider, model_name: deleted.model_name },
      });
    });
  }
}
