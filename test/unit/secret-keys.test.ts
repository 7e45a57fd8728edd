import { expect } from 'chai';
import { isSecretLookingKey, stripSecretLookingKeys } from '../../src/secret-keys.ts';

describe('secret-looking keys (what is removed from stored conversation info and redacted from 422 inputs)', () => {
  it('recognises secrets in snake, kebab and camel case', () => {
    for (const key of [
      'api_key', 'apiKey', 'X-Session-API-Key', 'aws_secret_access_key', 'aws_access_key_id', 'aws_session_token',
      'secret', 'client_secret', 'secret_registry', 'secrets', 'token', 'access_token', 'refreshToken',
      'password', 'PASSWORD', 'credentials', 'Authorization', 'cookie', 'private_key', 'session_key',
    ]) {
      expect(isSecretLookingKey(key), key).to.equal(true);
    }
  });

  it('leaves token counts and other ordinary keys alone', () => {
    for (const key of [
      'prompt_tokens', 'max_output_tokens', 'token_usages', 'accumulated_token_usage', 'custom_tokenizer',
      'auth_type', 'key', 'keyboard', 'monkey', 'secretary_name', 'title', 'model',
    ]) {
      expect(isSecretLookingKey(key), key).to.equal(false);
    }
  });

  it('removes string, object and array values at any depth and keeps numbers, booleans and nulls', () => {
    const value = {
      llm: { api_key: 'sk-1', aws_session_token: null, per_turn_token: 1500, model: 'm' },
      list: [{ password: 'pw' }, { secrets: ['a'] }],
      token: { nested: 'x' },
    };
    stripSecretLookingKeys(value);
    expect(value).to.deep.equal({ llm: { aws_session_token: null, per_turn_token: 1500, model: 'm' }, list: [{}, {}] });
  });
});
