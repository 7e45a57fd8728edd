/**
 * Whether an object key names a secret: `api_key`, `secret`, `client_secret`, `secret_registry`,
 * `access_token`, `password`, `credentials`, `authorization`, `cookie`, `private_key`,
 * `aws_access_key_id`, `X-Session-API-Key`, `apiKey`… (snake, kebab or camel case). Only the last word
 * counts for `token`, so token counts such as `prompt_tokens` or `token_usages` are not secrets.
 */
const SECRET_WORDS = /(^|_)(api_?key|apikey|api_keys|token|password|passwd|passphrase|credentials?|authorization|cookie|private_key|access_key|access_key_id|session_key|secret_key|secret|secrets)$/;
const SECRET_PREFIX = /^secrets?(_|$)/;

export function isSecretLookingKey(key: string): boolean {
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/[-\s.]+/g, '_')
    .toLowerCase();
  return SECRET_WORDS.test(words) || SECRET_PREFIX.test(words);
}

/**
 * Whether `key: value` holds a secret: a secret-looking key whose value could hold one (a string, an
 * object or an array); numbers, booleans and nulls never do (`per_turn_token: 1500` is a count).
 */
export function holdsSecret(key: string, value: unknown): boolean {
  return isSecretLookingKey(key) && (typeof value === 'string' || (value !== null && typeof value === 'object'));
}

/**
 * Removes, in place and at any depth, every secret-looking key whose value could hold a secret (a
 * string, an object or an array); numbers, booleans and nulls stay (`per_turn_token: 1500` is a
 * count). In place, so that values parsed by `parseJson` keep their exact number literals.
 */
export function stripSecretLookingKeys(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    for (const item of value) stripSecretLookingKeys(item);
    return;
  }
  const record = value as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const item = record[key];
    if (holdsSecret(key, item)) {
      delete record[key];
    } else {
      stripSecretLookingKeys(item);
    }
  }
}
