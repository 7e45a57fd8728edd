import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { postEvents } from '../helpers/webhook.ts';

/**
 * The kinds and fields the SDK added after 1.43.1, serialized by the SDK's own models with
 * `model_dump(mode="json")` (test/fixtures/agent-server/generator/make_newer_fixtures.py).
 */
const newerEvents = JSON.parse(readFileSync(new URL('../fixtures/agent-server/events-newer.json', import.meta.url), 'utf8')) as Record<string, unknown>[];

type Detail = { detail: { loc: (string | number)[]; type: string }[] };

describe('POST /api/v1/webhooks/events/{conversation_id}: kinds and fields of the SDK after 1.43.1, typed (strict)', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });
  const post = (conversationId: string, events: unknown[]) => postEvents(client, owner.sessionApiKey, conversationId, events);

  it('covers SecurityAnalysisEvent, AskUserRequestEvent, AskUserResponseEvent and ACPToolCallEvent.parent_tool_call_id', () => {
    expect([...new Set(newerEvents.map((e) => e.kind))].sort()).to.deep.equal(
      ['ACPToolCallEvent', 'AskUserRequestEvent', 'AskUserResponseEvent', 'SecurityAnalysisEvent'].sort(),
    );
    expect(newerEvents.some((e) => e.kind === 'ACPToolCallEvent' && typeof e.parent_tool_call_id === 'string')).to.equal(true);
  });

  it('accepts each as the agent-server posts it (32-hex id, batches of 5, redelivered) and reads it back byte-identical, unflagged', async () => {
    const conversationId = randomUUID();
    for (let start = 0; start < newerEvents.length; start += 5) {
      const batch = newerEvents.slice(start, start + 5);
      const first = await post(conversationId.replace(/-/g, ''), batch);
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      await post(conversationId.replace(/-/g, ''), batch).expect(200);
    }
    const page = await client.request
      .get(`/api/v1/conversations/${conversationId}/events?limit=100`)
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    const items = (page.body as { items: { event: unknown; unrecognized?: unknown }[] }).items;
    expect(items.map((item) => JSON.stringify(item.event))).to.deep.equal(newerEvents.map((event) => JSON.stringify(event)));
    expect(items.every((item) => item.unrecognized === undefined)).to.equal(true);
    const conversation = await client.request.get(`/api/v1/conversations/${conversationId}`).set('X-Access-Token', owner.accessToken).expect(200);
    expect(conversation.body).to.include({ event_count: newerEvents.length, unrecognized_event_count: 0 });
  });

  it('filters by the new kinds', async () => {
    const conversationId = randomUUID();
    await post(conversationId, newerEvents).expect(200);
    const page = await client.request
      .get(`/api/v1/conversations/${conversationId}/events?kind=AskUserRequestEvent&kind=AskUserResponseEvent`)
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    expect((page.body as { items: { event: { kind: string } }[] }).items.map((item) => item.event.kind)).to.deep.equal([
      'AskUserRequestEvent',
      'AskUserRequestEvent',
      'AskUserResponseEvent',
      'AskUserResponseEvent',
    ]);
  });

  it('keeps them closed, like the SDK models: an unknown property, even in a nested question or answer, is a 422', async () => {
    const byKind = (kind: string) => structuredClone(newerEvents.find((e) => e.kind === kind)!);
    const security = { ...byKind('SecurityAnalysisEvent'), verdict: 'x' };
    const request = byKind('AskUserRequestEvent');
    (request.questions as Record<string, unknown>[])[0]!.hint = 'x';
    const response = byKind('AskUserResponseEvent');
    (Object.values(response.answers as Record<string, Record<string, unknown>>)[0]!).free_text = 'x';
    const refused = await post(randomUUID(), [security, request, response]).expect(422);
    expect((refused.body as Detail).detail.map((d) => [d.loc.join('.'), d.type])).to.deep.include.members([
      ['body.0.verdict', 'extra_forbidden'],
      ['body.1.questions.0.hint', 'extra_forbidden'],
      ['body.2.answers.q_db.free_text', 'extra_forbidden'],
    ]);
  });

  it('checks their types: a risk outside SecurityRisk, an unknown answer action, a timeout of 0', async () => {
    const byKind = (kind: string) => structuredClone(newerEvents.find((e) => e.kind === kind)!);
    const security = byKind('SecurityAnalysisEvent');
    security.risks = { a: 'CRITICAL' };
    const response = { ...byKind('AskUserResponseEvent'), action: 'maybe' };
    const request = { ...byKind('AskUserRequestEvent'), timeout_seconds: 0 };
    const refused = await post(randomUUID(), [security, response, request]).expect(422);
    const locs = (refused.body as Detail).detail.map((d) => d.loc.join('.'));
    expect(locs).to.include.members(['body.0.risks.a', 'body.1.action', 'body.2.timeout_seconds']);
  });
});
