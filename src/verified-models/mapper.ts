import type { components } from '../../generated/openapi.ts';
import type { VerifiedModel } from './entities.ts';

export type VerifiedModelView = components['schemas']['VerifiedModel'];

/** The API's view of a verified model. */
export function toVerifiedModelView(model: VerifiedModel): VerifiedModelView {
  return {
    id: model.id,
    model_name: model.modelName,
    provider: model.provider,
    is_enabled: model.isEnabled,
    created_at: model.createdAt.toISOString(),
    updated_at: model.updatedAt.toISOString(),
  };
}
