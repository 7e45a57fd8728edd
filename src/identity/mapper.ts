import type { components } from '../../generated/openapi.ts';
import type { User } from './entities.ts';

/** The API's view of a super admin. */
export function toSuperAdminView(user: User): components['schemas']['SuperAdmin'] {
  return { user_id: user.id, email: user.email };
}
