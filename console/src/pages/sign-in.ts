import { api } from '../api.ts';
import { h, notice, replace } from '../dom.ts';
import { signIn, signedOutReasonText } from '../session.ts';
import type { Page } from '../main.ts';

/** Sign-in: paste an access token; it is checked with one call before the console opens. */
export const signInPage: Page = (main) => {
  const reason = signedOutReasonText();
  const message = h('div', { 'aria-live': 'polite' }, reason ? notice(reason, 'info') : null);
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', 'aria-describedby': 'token-help' });
  const button = h('button', { type: 'submit', class: 'btn primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card stack', id: 'sign-in' },
    h('h1', null, 'Sign in'),
    message,
    h('label', { for: 'token' }, 'Access token'),
    input,
    h('p', { id: 'token-help', class: 'hint' }, 'Paste the access token your administrator gave you. It stays in this tab only and is forgotten when you sign out or close the tab. No token yet? Ask your administrator for one.'),
    button,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    button.disabled = true;
    const { response } = await api.GET('/api/v1/conversations', { params: { query: { limit: 1 } }, headers: { 'X-Access-Token': token } });
    button.disabled = false;
    if (response.ok) return signIn(token);
    replace(message, notice(response.status === 401 ? 'This access token is not valid. Check that you pasted all of it.' : 'The server could not check the token; try again in a moment.', 'error'));
    input.select();
  });
  replace(main, h('div', { class: 'sign-in' }, h('p', { class: 'brand-large' }, 'Agent Platform'), form));
  input.focus();
};
