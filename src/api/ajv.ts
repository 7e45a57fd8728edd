import { Ajv2020 } from 'ajv/dist/2020.js';
import type { Options as AjvOptions } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { DASHED_UUID_PATTERN } from '../uuid.ts';

const addFormats = addFormatsModule.default;

/**
 * The validator for the contract: JSON Schema 2020-12 (the spec is OpenAPI 3.1), formats checked,
 * every error collected with its schema and data (`verbose`, for the 422 mapping), and one precise
 * error per bad event through the `kind` discriminator. `x-trim: true` on a string schema strips
 * surrounding whitespace before the string's other keywords are checked, as pydantic's
 * `str_strip_whitespace` does, and the handler receives the trimmed value.
 */
export function createAjv(options: AjvOptions = {}): Ajv2020 {
  const ajv = new Ajv2020({
    ...options,
    strict: false,
    allErrors: true,
    verbose: true,
    discriminator: true,
  });
  addFormats(ajv);
  // `format: uuid` means the dashed form only, as any validator reads it (ajv-formats would also take
  // a `urn:uuid:` prefix); where the 32-hex form is accepted the spec says so with a pattern.
  ajv.addFormat('uuid', DASHED_UUID_PATTERN);
  ajv.addKeyword({
    keyword: 'x-trim',
    type: 'string',
    schemaType: 'boolean',
    modifying: true,
    errors: false,
    // Runs before the length and pattern checks, so they apply to the trimmed value.
    before: 'maxLength',
    validate(trim: boolean, value: string, _schema, data) {
      if (trim && data?.parentData) (data.parentData as Record<string | number, unknown>)[data.parentDataProperty] = value.trim();
      return true;
    },
  });
  return ajv;
}
