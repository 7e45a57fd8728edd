import type { components, operations } from '../../../generated/openapi.ts';
import type { IdentityService } from '../../identity/identity-service.ts';
import { toAdminUserView, toCreatedKeyView } from '../../identity/mapper.ts';
import { principalOf, respond, type OperationHandlers } from '../context.ts';

type Schemas = components['schemas'];
type ListQuery = NonNullable<operations['listUsers']['parameters']['query']>;
type UserPath = operations['suspendUser']['parameters']['path'];

/** Handlers of the `users` tag; the spec restricts every operation to MANAGE_USERS. */
export function userHandlers(identity: IdentityService): OperationHandlers {
  return {
    async listUsers(operation, ctx) {
      const query = operation.request.query as ListQuery;
      const limit = query.limit ?? 50;
      const offset = query.offset ?? 0;
      const { users, total } = await identity.listUsers({ q: query.q, limit, offset });
      respond<Schemas['AdminUserPage']>(ctx, 200, { items: users.map(toAdminUserView), total, limit, offset });
    },
    async createUser(operation, ctx) {
      const { email } = operation.request.requestBody as Schemas['UserCreate'];
      const { user } = await identity.createUser(principalOf(operation).userId, email, { emailLoc: ['body', 'email'] });
      respond<Schemas['AdminUser']>(ctx, 201, toAdminUserView(await identity.userSummary(user.id)));
    },
    async createUserKey(operation, ctx) {
      const { user_id } = operation.request.params as UserPath;
      const body = operation.request.requestBody as Schemas['KeyCreate'];
      const principal = principalOf(operation);
      const issued = await identity.issueKey(
        principal.userId,
        { userId: user_id.toLowerCase() },
        { kind: body.kind, name: body.name, expiresInDays: body.expires_in_days },
        principal.credentialExpiresAt,
      );
      respond<Schemas['CreatedKey']>(ctx, 201, toCreatedKeyView(issued));
    },
    async suspendUser(operation, ctx) {
      const { user_id } = operation.request.params as UserPath;
      const principal = principalOf(operation);
      const user = await identity.suspendUser(principal.userId, { userId: user_id.toLowerCase() }, principal.userId);
      respond<Schemas['AdminUser']>(ctx, 200, toAdminUserView(await identity.userSummary(user.id)));
    },
    async resumeUser(operation, ctx) {
      const { user_id } = operation.request.params as UserPath;
      const user = await identity.resumeUser(principalOf(operation).userId, { userId: user_id.toLowerCase() });
      respond<Schemas['AdminUser']>(ctx, 200, toAdminUserView(await identity.userSummary(user.id)));
    },
  };
}
