import type { operations } from '../../../generated/openapi.ts';
import type { NewVerifiedModel, VerifiedModelService } from '../../verified-models/verified-model-service.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type ListQuery = NonNullable<operations['listVerifiedModels']['parameters']['query']>;
type ModelPath = operations['updateVerifiedModel']['parameters']['path'];
type UpdateBody = operations['updateVerifiedModel']['requestBody']['content']['application/json'];

/** Handlers of the `verified-models` tag; the spec restricts every operation to MANAGE_VERIFIED_MODELS. */
export function verifiedModelHandlers(service: VerifiedModelService): OperationHandlers {
  return {
    async createVerifiedModel(operation, ctx) {
      respond(ctx, 201, await service.create(principalOf(operation).userId, operation.request.requestBody as NewVerifiedModel));
    },
    async listVerifiedModels(operation, ctx) {
      const query = operation.request.query as ListQuery;
      const page = await service.list({
        provider: query.provider,
        isEnabled: query.is_enabled,
        limit: query.limit ?? 50,
        offset: query.offset ?? 0,
      });
      respond(ctx, 200, page);
    },
    async updateVerifiedModel(operation, ctx) {
      const { model_id } = operation.request.params as ModelPath;
      const { is_enabled } = operation.request.requestBody as UpdateBody;
      // Path parameters arrive as the text of the URL ("1e5" validates as an integer): use the number.
      respond(ctx, 200, await service.setEnabled(principalOf(operation).userId, Number(model_id), is_enabled));
    },
    async deleteVerifiedModel(operation, ctx) {
      const { model_id } = operation.request.params as ModelPath;
      await service.delete(principalOf(operation).userId, Number(model_id));
      ctx.status = 204;
    },
  };
}
