import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';

const MODELS = '/api/admin/verified-models';
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

interface VerifiedModel {
  id: number;
  model_name: string;
  provider: string;
  is_enabled: boolean;
  created_at: string;
  updated_at: string;
}

describe('verified models (super admins only)', () => {
  let client: TestApp;
  let admin: UserFixture;
  let member: UserFixture;
  before(async () => {
    client = await createTestApp();
  });
  beforeEach(async () => {
    admin = await createUserFixture({ superAdmin: true });
    member = await createUserFixture();
  });

  const create = (body: object, token = admin.accessToken) =>
    client.request.post(MODELS).set('X-Access-Token', token).send(body);

  const createModel = async (body: object) => (await create(body).expect(201)).body as VerifiedModel;

  const list = async (query = '') =>
    (await client.request.get(`${MODELS}${query}`).set('X-Access-Token', admin.accessToken).expect(200)).body as {
      items: VerifiedModel[];
      total: number;
      limit: number;
      offset: number;
    };

  describe('POST /api/admin/verified-models', () => {
    it('returns 201 with the full verified model', async () => {
      const response = await create({ model_name: 'claude-sonnet-4-5', provider: 'anthropic', is_enabled: true }).expect(201);
      const model = response.body as VerifiedModel;
      expect(model).to.have.all.keys('id', 'model_name', 'provider', 'is_enabled', 'created_at', 'updated_at');
      expect(model).to.include({ model_name: 'claude-sonnet-4-5', provider: 'anthropic', is_enabled: true });
      expect(model.id).to.be.a('number');
      expect(model.created_at).to.match(ISO_8601);
      expect(model.updated_at).to.match(ISO_8601);
    });

    it('defaults is_enabled to true and stores false when given', async () => {
      expect((await createModel({ model_name: 'gpt-4o', provider: 'openai' })).is_enabled).to.equal(true);
      expect((await createModel({ model_name: 'o3', provider: 'openai', is_enabled: false })).is_enabled).to.equal(false);
    });

    it('trims model_name and provider before storing them', async () => {
      const model = await createModel({ model_name: '  gpt-4o\t', provider: ' openai\n' });
      expect(model).to.include({ model_name: 'gpt-4o', provider: 'openai' });
      expect((await list()).items.map((m) => [m.provider, m.model_name])).to.deep.equal([['openai', 'gpt-4o']]);
    });

    it('checks the lengths after trimming (255 for model_name, 100 for provider)', async () => {
      const model = await createModel({ model_name: ` ${'m'.repeat(255)} `, provider: ` ${'p'.repeat(100)} ` });
      expect(model.model_name).to.have.length(255);
      expect(model.provider).to.have.length(100);
    });

    it('returns 409 when the model already exists', async () => {
      await createModel({ model_name: 'gpt-4o', provider: 'openai' });
      const response = await create({ model_name: ' gpt-4o ', provider: 'openai', is_enabled: false }).expect(409);
      expect(response.body).to.deep.equal({ detail: 'A verified model with this provider and model name already exists' });
      expect((await list()).total).to.equal(1);
    });

    it('accepts the same model name under another provider', async () => {
      await createModel({ model_name: 'llama-3-70b', provider: 'groq' });
      await createModel({ model_name: 'llama-3-70b', provider: 'together' });
    });

    it('returns 401 without X-Access-Token', async () => {
      const response = await client.request.post(MODELS).send({ model_name: 'gpt-4o', provider: 'openai' }).expect(401);
      expect(response.body).to.deep.equal({ detail: 'Missing X-Access-Token header' });
    });

    it('returns 401 for an unknown access token', async () => {
      const response = await create({ model_name: 'gpt-4o', provider: 'openai' }, 'apat_unknown').expect(401);
      expect(response.body).to.deep.equal({ detail: 'Invalid X-Access-Token' });
    });

    it('returns 403 for a user who is not a super admin, and creates nothing', async () => {
      const response = await create({ model_name: 'gpt-4o', provider: 'openai' }, member.accessToken).expect(403);
      expect(response.body).to.have.property('detail').that.is.a('string');
      expect((await list()).total).to.equal(0);
    });

    it('returns 422 when model_name is blank after trimming', async () => {
      const response = await create({ model_name: '   ', provider: 'openai' }).expect(422);
      expect(response.body.detail).to.have.length(1);
      expect(response.body.detail[0]).to.include({ type: 'string_too_short', msg: 'String should have at least 1 character' });
      expect(response.body.detail[0].loc).to.deep.equal(['body', 'model_name']);
    });

    it('returns 422 for each name that is too long', async () => {
      const response = await create({ model_name: 'm'.repeat(256), provider: 'p'.repeat(101) }).expect(422);
      const errors = response.body.detail as { loc: string[]; type: string; ctx: object }[];
      expect(errors.map((e) => [e.loc, e.type, e.ctx])).to.have.deep.members([
        [['body', 'model_name'], 'string_too_long', { max_length: 255 }],
        [['body', 'provider'], 'string_too_long', { max_length: 100 }],
      ]);
    });

    it('returns 422 when model_name or provider is missing', async () => {
      const response = await create({ is_enabled: true }).expect(422);
      const errors = response.body.detail as { loc: string[]; type: string }[];
      expect(errors.map((e) => [e.loc, e.type])).to.have.deep.members([
        [['body', 'model_name'], 'missing'],
        [['body', 'provider'], 'missing'],
      ]);
    });

    it('returns 422 for an unknown property or a non-boolean is_enabled', async () => {
      const response = await create({ model_name: 'gpt-4o', provider: 'openai', is_enabled: 'maybe', colour: 'blue' }).expect(422);
      const errors = response.body.detail as { loc: string[]; type: string }[];
      expect(errors.map((e) => [e.loc, e.type])).to.have.deep.members([
        [['body', 'is_enabled'], 'bool_type'],
        [['body', 'colour'], 'extra_forbidden'],
      ]);
    });
  });

  describe('GET /api/admin/verified-models', () => {
    beforeEach(async () => {
      await createModel({ model_name: 'gpt-4o', provider: 'openai' });
      await createModel({ model_name: 'claude-sonnet-4-5', provider: 'anthropic' });
      await createModel({ model_name: 'o3', provider: 'openai', is_enabled: false });
      await createModel({ model_name: 'claude-opus-4-1', provider: 'anthropic' });
    });

    it('lists the models ordered by provider then model name, with the total', async () => {
      const page = await list();
      expect(page.items.map((m) => `${m.provider}/${m.model_name}`)).to.deep.equal([
        'anthropic/claude-opus-4-1',
        'anthropic/claude-sonnet-4-5',
        'openai/gpt-4o',
        'openai/o3',
      ]);
      expect(page).to.include({ total: 4, limit: 50, offset: 0 });
    });

    it('filters by provider and by is_enabled', async () => {
      expect((await list('?provider=openai')).items.map((m) => m.model_name)).to.deep.equal(['gpt-4o', 'o3']);
      expect((await list('?is_enabled=false')).items.map((m) => m.model_name)).to.deep.equal(['o3']);
      const both = await list('?provider=openai&is_enabled=true');
      expect(both.items.map((m) => m.model_name)).to.deep.equal(['gpt-4o']);
      expect(both.total).to.equal(1);
    });

    it('pages with limit and offset; total counts every match', async () => {
      const page = await list('?limit=2&offset=1');
      expect(page.items.map((m) => m.model_name)).to.deep.equal(['claude-sonnet-4-5', 'gpt-4o']);
      expect(page).to.include({ total: 4, limit: 2, offset: 1 });
      expect((await list('?offset=10')).items).to.deep.equal([]);
    });

    it('returns 422 for a limit outside 1..200', async () => {
      for (const limit of [0, 201]) {
        const response = await client.request.get(`${MODELS}?limit=${limit}`).set('X-Access-Token', admin.accessToken).expect(422);
        expect(response.body.detail[0].loc).to.deep.equal(['query', 'limit']);
      }
    });

    it('returns 401 without X-Access-Token and 403 for a user who is not a super admin', async () => {
      await client.request.get(MODELS).expect(401);
      await client.request.get(MODELS).set('X-Access-Token', member.accessToken).expect(403);
    });
  });

  describe('PATCH /api/admin/verified-models/{model_id}', () => {
    const patch = (id: number | string, body: object, token = admin.accessToken) =>
      client.request.patch(`${MODELS}/${id}`).set('X-Access-Token', token).send(body);

    it('disables and enables a model, moving updated_at', async () => {
      const created = await createModel({ model_name: 'gpt-4o', provider: 'openai' });
      await new Promise((resolve) => setTimeout(resolve, 5));
      const disabled = (await patch(created.id, { is_enabled: false }).expect(200)).body as VerifiedModel;
      expect(disabled).to.deep.include({ ...created, is_enabled: false, updated_at: disabled.updated_at });
      expect(Date.parse(disabled.updated_at)).to.be.greaterThan(Date.parse(created.updated_at));
      expect((await patch(created.id, { is_enabled: true }).expect(200)).body.is_enabled).to.equal(true);
      expect((await list()).items[0]!.is_enabled).to.equal(true);
    });

    it('returns 404 when the model does not exist', async () => {
      const response = await patch(4711, { is_enabled: false }).expect(404);
      expect(response.body).to.deep.equal({ detail: 'Verified model not found' });
      await patch(2 ** 31 - 1, { is_enabled: false }).expect(404);
    });

    it('returns 422 without is_enabled or with a non-integer id', async () => {
      const created = await createModel({ model_name: 'gpt-4o', provider: 'openai' });
      const missing = await patch(created.id, {}).expect(422);
      expect(missing.body.detail[0]).to.include({ type: 'missing' });
      const badId = await patch('abc', { is_enabled: false }).expect(422);
      expect(badId.body.detail[0].loc).to.deep.equal(['path', 'model_id']);
    });

    it('returns 403 for a user who is not a super admin', async () => {
      const created = await createModel({ model_name: 'gpt-4o', provider: 'openai' });
      await patch(created.id, { is_enabled: false }, member.accessToken).expect(403);
      expect((await list()).items[0]!.is_enabled).to.equal(true);
    });
  });

  describe('DELETE /api/admin/verified-models/{model_id}', () => {
    const remove = (id: number, token = admin.accessToken) =>
      client.request.delete(`${MODELS}/${id}`).set('X-Access-Token', token);

    it('returns 204 without a body and removes the model', async () => {
      const created = await createModel({ model_name: 'gpt-4o', provider: 'openai' });
      const response = await remove(created.id).expect(204);
      expect(response.text).to.equal('');
      expect((await list()).total).to.equal(0);
    });

    it('returns 404 when the model does not exist (or was deleted already)', async () => {
      const created = await createModel({ model_name: 'gpt-4o', provider: 'openai' });
      await remove(created.id).expect(204);
      await remove(created.id).expect(404);
    });

    it('returns 403 for a user who is not a super admin', async () => {
      const created = await createModel({ model_name: 'gpt-4o', provider: 'openai' });
      await remove(created.id, member.accessToken).expect(403);
      expect((await list()).total).to.equal(1);
    });
  });
});
