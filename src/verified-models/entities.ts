import { EntitySchema, type Opt } from '@mikro-orm/core';

/** A model that admins have checked and offer to users. */
export class VerifiedModel {
  id!: number;
  modelName!: string;
  provider!: string;
  isEnabled: Opt<boolean> = true;
  createdAt: Opt<Date> = new Date();
  updatedAt: Opt<Date> = new Date();
}

export const VerifiedModelSchema = new EntitySchema<VerifiedModel>({
  class: VerifiedModel,
  tableName: 'verified_models',
  properties: {
    id: { type: 'integer', primary: true, autoincrement: true },
    modelName: { type: 'string', length: 255 },
    provider: { type: 'string', length: 100 },
    isEnabled: { type: 'boolean' },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date', onUpdate: () => new Date() },
  },
});
