import { UniqueConstraintViolationException, type EntityManager } from '@mikro-orm/postgresql';
import type { components } from '../../generated/openapi.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import { VerifiedModel } from './entities.ts';
import { toVerifiedModelView, type VerifiedModelView } from './mapper.ts';

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
  async create(input: NewVerifiedModel): Promise<VerifiedModelView> {
    const em = this.em.fork();
    const model = em.create(VerifiedModel, {
      modelName: input.model_name,
      provider: input.provider,
      isEnabled: input.is_enabled ?? true,
    });
    try {
      await em.flush();
    } catch (error) {
      // The unique constraint, not a prior lookup, decides: two concurrent creates cannot both win.
      if (error instanceof UniqueConstraintViolationException) {
        throw new ConflictError('A verified model with this provider and model name already exists');
      }
      throw error;
    }
    return toVerifiedModelView(model);
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
  async setEnabled(id: number, isEnabled: boolean): Promise<VerifiedModelView> {
    const em = this.em.fork();
    const model = id <= MAX_ID ? await em.findOne(VerifiedModel, { id }) : null;
    if (!model) throw new NotFoundError('Verified model not found');
    model.isEnabled = isEnabled;
    await em.flush();
    return toVerifiedModelView(model);
  }

  /** Removes a model. */
  async delete(id: number): Promise<void> {
    const deleted = id <= MAX_ID ? await this.em.fork().nativeDelete(VerifiedModel, { id }) : 0;
    if (deleted === 0) throw new NotFoundError('Verified model not found');
  }
}
