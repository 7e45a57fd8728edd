import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { parse } from 'yaml';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { eventsOfEveryKind, minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';
import { HIDDEN_KINDS, SHOWN_KINDS } from '../../src/sharing/visibility.ts';
import { SPEC_PATH } from '../../src/package-root.ts';

const newerEvents = JSON.parse(readFileSync(new URL('../fixtures/agent-server/events-newer.json', import.meta.url), 'utf8')) as Record<string, unknown>[];
const specKinds = (parse(readFileSync(SPEC_PATH, 'utf8')) as { components: { schemas: { EventKind: { enum: string[] } } } }).components.schemas.EventKind.enum;

interface ShareLink {
  id: string;
  url: string | null;
  token_hint: string;
  share_tags: boolean;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
}
interface EventPage {
  items: { seq: number; event: Record<string, unknown> }[];
  next_cursor: string | null;
}

const query = async <T>(sql: string, values: unknown[] = []): Promise<T[]> => (await testDatabase().orm.em.getConnection().execute(sql, values)) as T[];
const tokenOf = (link: ShareLink): string => link.url!.split('/share/')[1]!;

describe('sharing: share links and what they show', () => {
  let client: TestApp;
  let owner: UserFixture;
  let stranger: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
    stranger = await createUserFixture();
  });

  const deliver = (conversationId: string, events: unknown[], user = owner) => postEvents(client, user.sessionApiKey, conversationId, events).expect(200);
  const linksPath = (conversationId: string) => `/api/v1/conversations/${conversationId}/share-links`;
  const createLink = async (conversationId: string, body: object = {}, user = owner): Promise<ShareLink> => {
    const reply = await client.request.post(linksPath(conversationId)).set('X-Access-Token', user.accessToken).send(body);
    expect(reply.status, reply.text).to.equal(201);
    return reply.body as ShareLink;
  };
  const conversationWith = async (events: unknown[], user = owner): Promise<string> => {
    const id = randomUUID();
    await deliver(id, events, user);
    return id;
  };
  const sharedEvents = async (token: string, search = ''): Promise<EventPage> => {
    const reply = await client.request.get(`/api/v1/shared/${token}/events${search}`);
    expect(reply.status, reply.text).to.equal(200);
    return reply.body as EventPage;
  };

  describe('POST /api/v1/conversations/{conversation_id}/share-links', () => {
    it('returns 201 with a url holding a 256-bit token, stored only as its SHA-256', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      const link = await createLink(id, {});
      expect(link).to.include({ share_tags: false, expires_at: null, revoked_at: null });
      expect(link.url).to.match(/^http:\/\/[^/]+\/share\/apsh_[A-Za-z0-9_-]{43}$/);
      const token = tokenOf(link);
      expect(link.token_hint).to.equal(token.slice(0, 9));
      const rows = await query<Record<string, unknown>>('select * from share_links');
      expect(rows).to.have.length(1);
      expect(rows[0]!.token_hash).to.equal(createHash('sha256').update(token).digest('hex'));
      expect(JSON.stringify(rows)).to.not.include(token);
    });

    it('accepts no body at all', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      const reply = await client.request.post(linksPath(id)).set('X-Access-Token', owner.accessToken);
      expect(reply.status, reply.text).to.equal(201);
    });

    it('answers someone else\'s conversation exactly as an unknown one (404), for create, list and revoke', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      const link = await createLink(id);
      const unknown = randomUUID();
      const replies = [
        await client.request.post(linksPath(id)).set('X-Access-Token', stranger.accessToken).send({}),
        await client.request.post(linksPath(unknown)).set('X-Access-Token', stranger.accessToken).send({}),
        await client.request.get(linksPath(id)).set('X-Access-Token', stranger.accessToken),
        await client.request.get(linksPath(unknown)).set('X-Access-Token', stranger.accessToken),
        await client.request.delete(`${linksPath(id)}/${link.id}`).set('X-Access-Token', stranger.accessToken),
        await client.request.delete(`${linksPath(unknown)}/${link.id}`).set('X-Access-Token', stranger.accessToken),
      ];
      for (const reply of replies) expect([reply.status, reply.body]).to.deep.equal([404, { detail: 'Conversation not found' }]);
      expect(await query('select 1 from share_links')).to.have.length(1);
      expect((await sharedEvents(tokenOf(link))).items).to.have.length(1);
    });

    it('refuses an expiry in the past or more than 366 days away with a 422 naming expires_at', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      for (const expires_at of ['2020-01-01T00:00:00Z', new Date(Date.now() + 367 * 86_400_000).toISOString(), '9999-12-31T23:59:59Z']) {
        const reply = await client.request.post(linksPath(id)).set('X-Access-Token', owner.accessToken).send({ expires_at });
        expect(reply.status, reply.text).to.equal(422);
        expect(reply.body.detail[0].loc).to.deep.equal(['body', 'expires_at']);
      }
      const reply = await client.request.post(linksPath(id)).set('X-Access-Token', owner.accessToken).send({ expires_at: 'tomorrow' });
      expect(reply.status).to.equal(422);
      const inAWeek = new Date(Date.now() + 7 * 86_400_000).toISOString();
      expect((await createLink(id, { expires_at: inAWeek })).expires_at).to.equal(inAWeek);
    });

    it('needs an access token: no credential → 401, a session API key → 401', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      expect((await client.request.post(linksPath(id)).send({})).status).to.equal(401);
      expect((await client.request.post(linksPath(id)).set('X-Session-API-Key', owner.sessionApiKey).send({})).status).to.equal(401);
    });

    it('allows 20 active links per conversation, then 409', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      for (let i = 0; i < 20; i++) await createLink(id);
      const reply = await client.request.post(linksPath(id)).set('X-Access-Token', owner.accessToken).send({});
      expect(reply.status, reply.text).to.equal(409);
      const listed = (await client.request.get(linksPath(id)).set('X-Access-Token', owner.accessToken)).body.items as ShareLink[];
      await client.request.delete(`${linksPath(id)}/${listed[0]!.id}`).set('X-Access-Token', owner.accessToken).expect(200);
      await createLink(id);
    });
  });

  describe('GET and DELETE …/share-links', () => {
    it('lists working links first with url null; revoking stops the link at once, API and page; revoking again changes nothing', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      const first = await createLink(id);
      const second = await createLink(id, { share_tags: true });
      const token = tokenOf(first);
      await client.request.get(`/api/v1/shared/${token}`).expect(200);
      const revoked = await client.request.delete(`${linksPath(id)}/${first.id}`).set('X-Access-Token', owner.accessToken);
      expect(revoked.status, revoked.text).to.equal(200);
      expect(revoked.body.revoked_at).to.be.a('string');
      expect(revoked.body.url).to.equal(null);
      for (const path of [`/api/v1/shared/${token}`, `/api/v1/shared/${token}/events`]) {
        const reply = await client.request.get(path);
        expect([reply.status, reply.body]).to.deep.equal([404, { detail: 'This share link does not exist, has expired or was revoked' }]);
      }
      const page = await client.request.get(`/share/${token}`);
      expect(page.status).to.equal(404);
      expect(page.text).to.include('no longer available');
      const again = await client.request.delete(`${linksPath(id)}/${first.id}`).set('X-Access-Token', owner.accessToken);
      expect(again.body).to.deep.equal(revoked.body);
      const listed = await client.request.get(linksPath(id)).set('X-Access-Token', owner.accessToken);
      expect(listed.status).to.equal(200);
      expect((listed.body.items as ShareLink[]).map((link) => [link.id, link.url, link.revoked_at === null])).to.deep.equal([
        [second.id, null, true],
        [first.id, null, false],
      ]);
      await client.request.get(`/api/v1/shared/${tokenOf(second)}`).expect(200);
    });

    it('an expired link answers 404 at once', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      const link = await createLink(id, { expires_at: new Date(Date.now() + 3_600_000).toISOString() });
      await client.request.get(`/api/v1/shared/${tokenOf(link)}/events`).expect(200);
      await query("update share_links set expires_at = now() - interval '1 millisecond'");
      await client.request.get(`/api/v1/shared/${tokenOf(link)}`).expect(404);
      await client.request.get(`/api/v1/shared/${tokenOf(link)}/events`).expect(404);
      expect((await client.request.get(`/share/${tokenOf(link)}`)).status).to.equal(404);
    });

    it('a link of conversation A cannot be revoked on B\'s path, and its token is no credential', async () => {
      const a = await conversationWith([minimalEvent('PauseEvent')]);
      const b = await conversationWith([minimalEvent('InterruptEvent')]);
      const link = await createLink(a);
      const reply = await client.request.delete(`${linksPath(b)}/${link.id}`).set('X-Access-Token', owner.accessToken);
      expect([reply.status, reply.body]).to.deep.equal([404, { detail: 'Share link not found' }]);
      expect((await client.request.get(`/api/v1/conversations/${a}`).set('X-Access-Token', tokenOf(link))).status).to.equal(401);
      expect((await client.request.get(`/api/v1/conversations/${b}/events`).set('X-Access-Token', tokenOf(link))).status).to.equal(401);
      const kinds = (await sharedEvents(tokenOf(link))).items.map((item) => item.event.kind);
      expect(kinds).to.deep.equal(['PauseEvent']);
      for (const bad of [`${tokenOf(link)}x`, tokenOf(link).slice(0, -1), 'apsh_', link.id, a]) await client.request.get(`/api/v1/shared/${encodeURIComponent(bad)}`).expect(404);
    });

    it('audits every link created and revoked (not a repeated revocation)', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      const link = await createLink(id, { share_tags: true });
      await client.request.delete(`${linksPath(id)}/${link.id}`).set('X-Access-Token', owner.accessToken).expect(200);
      await client.request.delete(`${linksPath(id)}/${link.id}`).set('X-Access-Token', owner.accessToken).expect(200);
      const rows = await query<{ actor: string; action: string; target_type: string; target_id: string; summary: string }>(
        'select actor, action, target_type, target_id, summary::text as summary from audit_log order by id',
      );
      expect(rows.map((row) => [row.actor, row.action, row.target_type, row.target_id])).to.deep.equal([
        [owner.userId, 'share_link.created', 'share_link', link.id],
        [owner.userId, 'share_link.revoked', 'share_link', link.id],
      ]);
      expect(JSON.parse(rows[0]!.summary)).to.deep.equal({ conversation_id: id, expires_at: null, share_tags: true });
      expect(rows.map((row) => row.summary).join()).to.not.include(tokenOf(link));
    });
  });

  describe('GET /api/v1/shared/{token} and …/events, signed out', () => {
    it('every kind of the spec is either shown or hidden, never both', () => {
      for (const kind of specKinds) expect(SHOWN_KINDS.has(kind) !== HIDDEN_KINDS.has(kind), kind).to.equal(true);
      expect([...SHOWN_KINDS, ...HIDDEN_KINDS].sort()).to.deep.equal([...specKinds].sort());
    });

    it('shows exactly the visible kinds of one event of every kind, both orders, paged, with secrets and encrypted_content removed', async () => {
      const events = [...eventsOfEveryKind(), ...newerEvents.filter((event) => event.kind !== 'ACPToolCallEvent')];
      expect([...new Set(events.map((event) => event.kind as string))].sort()).to.deep.equal([...specKinds].sort());
      const action = events.find((event) => event.kind === 'ActionEvent')!;
      // Open payloads: what the secret stripping removes and an encrypted_content deep inside.
      action.action = { ...(action.action as object), api_key: 'sk-live-SHARED-SECRET', headers: { Authorization: 'Bearer SHARED-BEARER' }, extra: { encrypted_content: 'DEEP-ENCRYPTED' }, per_turn_token: 7 };
      const id = await conversationWith(events);
      const owned = await client.request.get(`/api/v1/conversations/${id}/events?limit=1000`).set('X-Access-Token', owner.accessToken);
      expect(owned.text).to.include('sk-live-SHARED-SECRET').and.include('SHARED-BEARER');
      const token = tokenOf(await createLink(id));

      const ascending = await sharedEvents(token, '?limit=1000');
      const stored = (owned.body as EventPage).items.filter((item) => SHOWN_KINDS.has(item.event.kind as string));
      expect(ascending.items.map((item) => item.seq)).to.deep.equal(stored.map((item) => item.seq));
      const expected = events.map((event) => event.kind as string).filter((kind) => !HIDDEN_KINDS.has(kind));
      expect(ascending.items.map((item) => item.event.kind)).to.deep.equal(expected);
      for (const kind of HIDDEN_KINDS) expect(ascending.items.map((item) => item.event.kind)).to.not.include(kind);

      const text = JSON.stringify(ascending);
      for (const secret of ['sk-live-SHARED-SECRET', 'SHARED-BEARER', 'DEEP-ENCRYPTED', 'gAAAAA-secret-reasoning', '"api_key"', '"Authorization"']) expect(text).to.not.include(secret);
      const sharedAction = ascending.items.find((item) => item.event.kind === 'ActionEvent')!.event as Record<string, Record<string, unknown>>;
      expect(sharedAction.action).to.deep.include({ command: 'ls -la', per_turn_token: 7, headers: {}, extra: { encrypted_content: null } });
      expect(sharedAction.responses_reasoning_item!.encrypted_content).to.equal(null);
      // Events with nothing to remove go out as stored.
      const message = (owned.body as EventPage).items.find((item) => item.event.kind === 'MessageEvent')!;
      expect(ascending.items.find((item) => item.seq === message.seq)).to.deep.equal(message);

      const descending = await sharedEvents(token, '?order=desc&limit=1000');
      expect(descending.items.map((item) => item.seq)).to.deep.equal(ascending.items.map((item) => item.seq).reverse());
      for (const order of ['asc', 'desc']) {
        const seen: number[] = [];
        let cursor: string | null = null;
        do {
          const page: EventPage = await sharedEvents(token, `?order=${order}&limit=4${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
          seen.push(...page.items.map((item) => item.seq));
          cursor = page.next_cursor;
        } while (cursor);
        expect(seen).to.deep.equal(order === 'asc' ? ascending.items.map((i) => i.seq) : descending.items.map((i) => i.seq));
      }
      expect((await sharedEvents(token, '?kind=TokenEvent&kind=SystemPromptEvent')).items).to.deep.equal([]);
      expect((await sharedEvents(token, '?kind=PauseEvent')).items.map((item) => item.event.kind)).to.deep.equal(['PauseEvent']);

      const conversation = await client.request.get(`/api/v1/shared/${token}`);
      expect(conversation.status).to.equal(200);
      expect(conversation.body.event_count).to.equal((owned.body as EventPage).items.length);
      expect(conversation.body.tags).to.equal(null);
    });

    it('never names the owner: no e-mail, user id or conversation id in any shared answer; the access log holds no token', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent'), minimalEvent('MessageEvent')]);
      await query(`update conversations set tags = '{"team":"billing"}'::jsonb where id = ?`, [id]);
      const link = await createLink(id);
      const tagged = await createLink(id, { share_tags: true });
      const bodies = [
        (await client.request.get(`/api/v1/shared/${tokenOf(link)}`)).text,
        (await client.request.get(`/api/v1/shared/${tokenOf(link)}/events`)).text,
        (await client.request.get(`/api/v1/shared/${tokenOf(tagged)}`)).text,
        (await client.request.get(`/share/${tokenOf(link)}`)).text,
      ];
      for (const body of bodies) {
        for (const identity of [owner.email, owner.userId, owner.accessToken, owner.sessionApiKey, id, id.replace(/-/g, '')]) expect(body).to.not.include(identity);
      }
      // The access log names a link by its hint, never its token (a capability in the path).
      const logged = client.logs.join('');
      expect(logged).to.include(`"path":"/share/${tokenOf(link).slice(0, 9)}…"`).and.include(`/api/v1/shared/${tokenOf(link).slice(0, 9)}…/events`);
      expect(logged).to.not.include(tokenOf(link)).and.not.include(tokenOf(tagged));
      expect(JSON.parse(bodies[0]!).tags).to.equal(null);
      expect(JSON.parse(bodies[2]!).tags).to.deep.equal({ team: 'billing' });
    });

    it('answers 404 for an unknown token, the same as a revoked one', async () => {
      const reply = await client.request.get(`/api/v1/shared/apsh_${'A'.repeat(43)}`);
      expect([reply.status, reply.body]).to.deep.equal([404, { detail: 'This share link does not exist, has expired or was revoked' }]);
    });
  });

  describe('GET /share/{token}', () => {
    it('serves the read-only viewer with noindex and a strict CSP, and ignores ?utm_source', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      const token = tokenOf(await createLink(id));
      for (const search of ['', '?utm_source=newsletter&utm_medium=email', '?ref=x&ref=y']) {
        const reply = await client.request.get(`/share/${token}${search}`);
        expect(reply.status, `${search}: ${reply.text.slice(0, 200)}`).to.equal(200);
        expect(reply.headers['content-type']).to.match(/^text\/html/);
        expect(reply.headers['x-robots-tag']).to.include('noindex');
        expect(reply.headers['referrer-policy']).to.equal('no-referrer');
        expect(reply.headers['content-security-policy']).to.include("default-src 'none'").and.include("script-src 'self'").and.not.include('unsafe');
        expect(reply.text).to.match(/<meta name="robots" content="noindex[^"]*">/);
        expect(reply.text).to.include('/console/share.js').and.not.include('console/console.js');
      }
      const gone = await client.request.get(`/share/apsh_${'A'.repeat(43)}?utm_source=x`);
      expect(gone.status).to.equal(404);
      expect(gone.headers['x-robots-tag']).to.include('noindex');
      expect(gone.text).to.include('This link is no longer available');
    });
  });

  describe('SHARING_ENABLED=false', () => {
    it('refuses new links with a clear 403, answers 404 through existing links, and still lets the owner list and revoke', async () => {
      const id = await conversationWith([minimalEvent('PauseEvent')]);
      const link = await createLink(id);
      const off = await createTestApp({ sharingEnabled: false });
      const reply = await off.request.post(linksPath(id)).set('X-Access-Token', owner.accessToken).send({});
      expect([reply.status, reply.body]).to.deep.equal([403, { detail: 'Sharing is switched off on this server (SHARING_ENABLED=false)' }]);
      await off.request.get(`/api/v1/shared/${tokenOf(link)}`).expect(404);
      await off.request.get(`/api/v1/shared/${tokenOf(link)}/events`).expect(404);
      expect((await off.request.get(`/share/${tokenOf(link)}`)).status).to.equal(404);
      expect((await off.request.get(linksPath(id)).set('X-Access-Token', owner.accessToken)).body.items).to.have.length(1);
      await off.request.delete(`${linksPath(id)}/${link.id}`).set('X-Access-Token', owner.accessToken).expect(200);
      await client.request.get(`/api/v1/shared/${tokenOf(link)}`).expect(404);
    });
  });
});
