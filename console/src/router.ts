/** Routes live in the URL fragment (`#/conversations/{id}`), so the server serves one page at `/`. */

export interface Route {
  readonly page: 'conversations' | 'conversation' | 'usage' | 'account' | 'webhook-endpoint' | 'admin' | 'members' | 'invitation' | 'not-found';
  readonly id?: string;
  /** An event to open the conversation at (`#/conversations/{id}/events/{seq}`). */
  readonly seq?: number;
  readonly query: URLSearchParams;
}

export function currentRoute(): Route {
  const hash = location.hash.replace(/^#/, '') || '/conversations';
  const [path = '', search = ''] = hash.split('?');
  const query = new URLSearchParams(search);
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0 || (parts[0] === 'conversations' && parts.length === 1)) return { page: 'conversations', query };
  if (parts[0] === 'conversations' && parts.length === 2) return { page: 'conversation', id: parts[1], query };
  if (parts[0] === 'conversations' && parts.length === 4 && parts[2] === 'events' && /^[1-9]\d{0,15}$/.test(parts[3]!)) return { page: 'conversation', id: parts[1], seq: Number(parts[3]), query };
  if (parts[0] === 'usage' && parts.length === 1) return { page: 'usage', query };
  if (parts[0] === 'account' && parts.length === 1) return { page: 'account', query };
  if (parts[0] === 'webhook-endpoints' && parts.length === 2) return { page: 'webhook-endpoint', id: parts[1], query };
  if (parts[0] === 'admin' && parts.length === 1) return { page: 'admin', query };
  if (parts[0] === 'members' && parts.length === 1) return { page: 'members', query };
  if (parts[0] === 'invitations' && parts.length === 2) return { page: 'invitation', id: parts[1], query };
  return { page: 'not-found', query };
}

/** Changes the fragment's query without adding a history entry per keystroke. */
export function replaceQuery(query: URLSearchParams): void {
  const [path = ''] = location.hash.replace(/^#/, '').split('?');
  const search = query.toString();
  history.replaceState(null, '', `#${path || '/conversations'}${search ? `?${search}` : ''}`);
}
