import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { DeliveryWorker } from '../../src/outbound/delivery-worker.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { addOrganizationMember, createOrganizationFixture } from '../helpers/org-members.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { waitFor } from '../helpers/server-process.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';
import { outboundApp, Receiver, verifyDelivery, type OutboundApp } from '../helpers/outbound.ts';

/** Outbound webhook endpoints belong to the organization they are created in (`X-Org-Id`). */
describe('outbound webhook endpoints of an organization', function () {
  this.timeout(60_000);

  let app: OutboundApp;
  let worker: DeliveryWorker | undefined;
  let owner: UserFixture;
  let admin: UserFixture;
  let member: UserFixture;
  let viewer: UserFixture;
  let team: string;
  let teamReceiver: Receiver;
  let personalReceiver: Receiver;

  before(async () => {
    app = await outboundApp();
  });
  beforeEach(async () => {
    [owner, admin, member, viewer] = (await Promise.all([1, 2, 3, 4].map(() => createUserFixture()))) as [UserFixture, UserFixture, UserFixture, UserFixture];
    team = await createOrganizationFixture(owner.userId);
    await addOrganizationMember(team, admin.userId, 'admin');
    await addOrganizationMember(team, member.userId, 'member');
    await addOrganizationMember(team, viewer.userId, 'viewer');
    teamReceiver = await new Receiver().start();
    personalReceiver = await new Receiver().start();
  });
  afterEach(async () => {
    await worker?.stop(1_000);
    worker = undefined;
    await Promise.all([teamReceiver.stop(), personalReceiver.stop()]);
  });

  /** POST /api/v1/webhook-endpoints as `who`, acting in `orgId` (their default when undefined). */
  const createEndpoint = (who: UserFixture, url: string, orgId?: string) => {
    const request = app.request.post('/api/v1/webhook-endpoints').set('X-Access-Token', who.accessToken);
    return (orgId ? request.set('X-Org-Id', orgId) : request).send({ url, description: 'team hooks' });
  };
  const endpointIds = async (who: UserFixture, orgId?: string) => {
    const request = app.request.get('/api/v1/webhook-endpoints').set('X-Access-Token', who.accessToken);
    const response = await (orgId ? request.set('X-Org-Id', orgId) : request).expect(200);
    return (response.body.items as { id: string }[]).map((item) => item.id);
  };
  /** The conversation ids of the `conversation.created` messages `receiver` got. */
  const createdConversations = (receiver: Receiver) => receiver.ofType('conversation.created').map((message) => message.data.conversation_id);

  it("delivers the events of the organization's session keys to the endpoint an admin created there, and not the admin's personal ones", async () => {
    const created = await createEndpoint(admin, teamReceiver.url, team).expect(201);
    rememberSecret(created.body.secret);
    const personal = await createEndpoint(admin, personalReceiver.url).expect(201);
    rememberSecret(personal.body.secret);
    expect(await endpointIds(admin, team)).to.deep.equal([created.body.id]);
    expect(await endpointIds(owner, team)).to.deep.equal([created.body.id]);
    expect(await endpointIds(admin)).to.deep.equal([personal.body.id]);
    const [row] = await testDatabase().orm.em.getConnection().execute<{ owner_id: string }[]>('select owner_id from webhook_endpoints where id = ?', [created.body.id]);
    expect(row!.owner_id).to.equal(team);

    // A runtime's key of the organization, made by a member acting in it.
    const key = await app.request
      .post('/api/keys')
      .set('X-Access-Token', member.accessToken)
      .set('X-Org-Id', team)
      .send({ kind: 'session_api_key', name: 'team runtime' })
      .expect(201);
    rememberSecret(key.body.secret);
    worker = app.worker;
    await worker.start();
    const teamConversation = randomUUID();
    const personalConversation = randomUUID();
    await postEvents(app, key.body.secret, teamConversation, [minimalEvent('MessageEvent', { id: randomUUID() })]).expect(200);
    await postEvents(app, admin.sessionApiKey, personalConversation, [minimalEvent('MessageEvent', { id: randomUUID() })]).expect(200);

    expect(await waitFor(() => teamReceiver.ofType('conversation.events').length >= 1 && createdConversations(personalReceiver).length >= 1, 15_000)).to.equal(true);
    // Both conversations' messages went out: the personal one reached only the personal endpoint.
    expect(createdConversations(teamReceiver)).to.deep.equal([teamConversation]);
    expect(teamReceiver.ofType('conversation.events').map((message) => message.data.conversation_id)).to.deep.equal([teamConversation]);
    expect(createdConversations(personalReceiver)).to.deep.equal([personalConversation]);
    for (const request of teamReceiver.requests) verifyDelivery(created.body.secret, request);
    // What was stored for the organization names only its conversation (the worker fans these out to its endpoints).
    const teamMessages = await testDatabase().orm.em.getConnection().execute<{ conversation_id: string }[]>('select distinct conversation_id from webhook_messages where owner_id = ?', [team]);
    expect(teamMessages.map((message) => message.conversation_id)).to.deep.equal([teamConversation]);
    const [conversation] = await testDatabase().orm.em.getConnection().execute<{ owner_id: string }[]>('select owner_id from conversations where id = ?', [teamConversation]);
    expect(conversation!.owner_id).to.equal(team);
  });

  it('refuses a member and a viewer of the organization (403) and stores nothing; in their personal organization they may', async () => {
    for (const who of [member, viewer]) {
      const refused = await createEndpoint(who, teamReceiver.url, team).expect(403);
      expect(refused.body.detail).to.be.a('string');
    }
    expect(await endpointIds(owner, team)).to.deep.equal([]);
    const own = await createEndpoint(member, teamReceiver.url).expect(201);
    rememberSecret(own.body.secret);
    expect(await endpointIds(owner, team)).to.deep.equal([]);
    expect(await endpointIds(member)).to.deep.equal([own.body.id]);
  });

  it('answers 404 for an endpoint of another organization, as for an unknown one', async () => {
    const created = await createEndpoint(admin, teamReceiver.url, team).expect(201);
    rememberSecret(created.body.secret);
    await app.request.get(`/api/v1/webhook-endpoints/${created.body.id}`).set('X-Access-Token', admin.accessToken).expect(404);
    await app.request.get(`/api/v1/webhook-endpoints/${randomUUID()}`).set('X-Access-Token', admin.accessToken).expect(404);
    await app.request.get(`/api/v1/webhook-endpoints/${created.body.id}`).set('X-Access-Token', admin.accessToken).set('X-Org-Id', team).expect(200);
  });
});
