import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { postEvents } from '../helpers/webhook.ts';
import { testConfig, testDatabase } from '../helpers/hooks.ts';
import { createLogger } from '../../src/logger.ts';
import { SearchIndexer } from '../../src/search/indexer.ts';
import { deleteEventBatch } from '../../src/retention/queries.ts';

interface Hit {
  conversation_id: string;
  conversation_title: string | null;
  seq: number;
  kind: string;
  event_id: string;
  timestamp: string;
  snippet: { text: string; highlights: [number, number][] };
}
interface HitPage {
  items: Hit[];
  next_cursor: string | null;
  indexed_through: string;
}

const text = (value: string) => ({ cache_prompt: false, type: 'text', text: value });
const message = (source: 'user' | 'agent', value: string) =>
  minimalEvent('MessageEvent', {
    id: randomUUID(),
    source,
    llm_message: { role: source === 'user' ? 'user' : 'assistant', content: [text(value)], tool_calls: null, tool_call_id: null },
  });

/** The highlighted parts of a snippet, as the console cuts them out (offsets in code points). */
const highlighted = (hit: Hit): string[] => hit.snippet.highlights.map(([from, to]) => Array.from(hit.snippet.text).slice(from, to).join(''));

describe('GET /api/v1/search/events', () => {
  let client: TestApp;
  let owner: UserFixture;
  let indexer: SearchIndexer;

  before(async () => {
    client = await createTestApp();
    indexer = new SearchIndexer(testDatabase().orm.em, testConfig().search, createLogger('silent'));
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  async function post(user: UserFixture, conversationId: string, events: unknown[]): Promise<void> {
    await postEvents(client, user.sessionApiKey, conversationId, events).expect(200);
  }

  async function search(user: UserFixture, query: Record<string, string | string[]>, status = 200): Promise<HitPage> {
    const response = await client.request.get('/api/v1/search/events').query(query).set('X-Access-Token', user.accessToken).expect(status);
    return response.body as HitPage;
  }

  async function count(user: UserFixture, query: Record<string, string | string[]>): Promise<number> {
    const response = await client.request.get('/api/v1/search/events/count').query(query).set('X-Access-Token', user.accessToken).expect(200);
    return (response.body as { count: number }).count;
  }

  /** The kinds of the events `q` finds. */
  async function kindsFound(q: string, user = owner): Promise<string[]> {
    return (await search(user, { q, limit: '100' })).items.map((hit) => hit.kind).sort();
  }

  describe('what is searchable', () => {
    it('finds each field kind by its own text', async () => {
      const conversation = randomUUID();
      await post(owner, conversation, [
        message('user', 'Please fix zebramessage now'),
        minimalEvent('ActionEvent', {
          id: randomUUID(),
          thought: [text('zebrathought first')],
          reasoning_content: 'zebrareasoning here',
          thinking_blocks: [{ type: 'thinking', thinking: 'zebrathinking block', signature: 'sig' }],
          responses_reasoning_item: { id: 'rs', summary: ['zebrasummaryline'], content: null, encrypted_content: 'zebraencrypted', status: null },
          action: { command: 'pytest -k zebracommand', path: '/repo/src/zebrapath.py', file_text: 'def zebraedit(): pass', kind: 'FileEditorAction' },
          tool_name: 'zebratool',
          tool_call: { id: 'c1', responses_item_id: null, name: 'zebratool', arguments: '{"pattern": "zebraargument"}', origin: 'completion' },
          summary: null,
        }),
        minimalEvent('ObservationEvent', {
          id: randomUUID(),
          observation: { content: [text('x'.repeat(100) + ' zebraoutput done')], command: 'ls', exit_code: 1, kind: 'TerminalObservation' },
        }),
        minimalEvent('AgentErrorEvent', { id: randomUUID(), error: 'Tool failed: zebraerror' }),
        minimalEvent('ConversationErrorEvent', { id: randomUUID(), code: 'ZebraCodeError', detail: 'zebradetail stopped' }),
        minimalEvent('HookExecutionEvent', { id: randomUUID(), hook_command: './zebrahookcmd.sh', stdout: 'zebrahookout', stderr: 'zebrahookerr' }),
        minimalEvent('Condensation', { id: randomUUID(), summary: 'zebracondensed summary' }),
        minimalEvent('CondensationSummaryEvent', { id: randomUUID(), summary: 'zebracondensationsummary' }),
        minimalEvent('UserRejectObservation', { id: randomUUID(), rejection_reason: 'zebrarejected by policy' }),
        minimalEvent('ServerErrorEvent', { id: randomUUID(), detail: 'zebraserver socket closed' }),
      ]);
      await indexer.catchUp();
      const expected: Record<string, string> = {
        zebramessage: 'MessageEvent',
        zebrathought: 'ActionEvent',
        zebrareasoning: 'ActionEvent',
        zebrathinking: 'ActionEvent',
        zebrasummaryline: 'ActionEvent',
        zebracommand: 'ActionEvent',
        'zebrapath.py': 'ActionEvent',
        zebraedit: 'ActionEvent',
        zebratool: 'ActionEvent',
        zebraargument: 'ActionEvent',
        zebraoutput: 'ObservationEvent',
        zebraerror: 'AgentErrorEvent',
        ZebraCodeError: 'ConversationErrorEvent',
        zebradetail: 'ConversationErrorEvent',
        'zebrahookcmd.sh': 'HookExecutionEvent',
        zebrahookout: 'HookExecutionEvent',
        zebrahookerr: 'HookExecutionEvent',
        zebracondensed: 'Condensation',
        zebracondensationsummary: 'CondensationSummaryEvent',
        zebrarejected: 'UserRejectObservation',
        zebraserver: 'ServerErrorEvent',
      };
      for (const [q, kind] of Object.entries(expected)) expect(await kindsFound(q), q).to.deep.equal([kind]);
    });

    it('never finds encrypted_content or the value of a secret-looking key, nor shows it in a snippet', async () => {
      const conversation = randomUUID();
      await post(owner, conversation, [
        minimalEvent('ActionEvent', {
          id: randomUUID(),
          thought: [text('visible thought')],
          responses_reasoning_item: { id: 'rs', summary: [], content: null, encrypted_content: 'zebraencrypted', status: null },
          action: { command: 'deploy', api_key: 'sk-zebraapikey', env: { AWS_SECRET_ACCESS_KEY: 'zebraaws', password: 'zebrapassword' }, kind: 'TerminalAction' },
          tool_call: { id: 'c1', responses_item_id: null, name: 'terminal', arguments: '{"command": "deploy", "token": "zebratoken"}', origin: 'completion' },
        }),
        minimalEvent('HookExecutionEvent', { id: randomUUID(), hook_input: { authorization: 'Bearer zebrabearer', tool_name: 'terminal' } }),
      ]);
      await indexer.catchUp();
      for (const secret of ['zebraencrypted', 'zebraapikey', 'sk-zebraapikey', 'zebraaws', 'zebrapassword', 'zebratoken', 'zebrabearer', 'zebra*']) {
        expect((await search(owner, { q: secret })).items, secret).to.deep.equal([]);
        expect(await count(owner, { q: secret }), secret).to.equal(0);
      }
      const [hit] = (await search(owner, { q: 'deploy' })).items;
      expect(hit!.snippet.text).to.include('deploy').and.not.include('zebra');
    });

    it('keeps text with \\u0000 and lone surrogates searchable', async () => {
      const conversation = randomUUID();
      const raw = `[{"kind":"MessageEvent","id":"${randomUUID()}","source":"user","llm_message":{"role":"user","content":[{"type":"text","text":"nul\\u0000here and \\ud800lone zebrasurrogate"}]}}]`;
      await postEvents(client, owner.sessionApiKey, conversation, raw).expect(200);
      await indexer.catchUp();
      const [hit] = (await search(owner, { q: 'zebrasurrogate' })).items;
      expect(hit!.snippet.text).to.equal('nul here and \uFFFDlone zebrasurrogate');
      expect(highlighted(hit!)).to.deep.equal(['zebrasurrogate']);
      expect((await search(owner, { q: 'here' })).items).to.have.length(1);
    });
  });

  describe('query syntax', () => {
    let conversation: string;
    beforeEach(async () => {
      conversation = randomUUID();
      await post(owner, conversation, [
        message('agent', 'Error: read ECONNRESET while uploading'), // 1
        message('agent', 'Edited src/utils/timeutil.py to call parse_duration_ms'), // 2
        message('agent', 'The parser in parseDuration handles hours'), // 3
        message('agent', 'fix the failing test then retry'), // 4
        message('agent', 'the test is failing, fix it'), // 5
      ]);
      await indexer.catchUp();
    });
    const seqs = async (q: string) => (await search(owner, { q })).items.map((hit) => hit.seq).sort();

    it('words must all match, as whole words, whatever their case', async () => {
      expect(await seqs('econnreset')).to.deep.equal([1]);
      expect(await seqs('ECONNRESET uploading')).to.deep.equal([1]);
      expect(await seqs('ECONNRESET hours')).to.deep.equal([]);
      expect(await seqs('fix test')).to.deep.equal([4, 5]);
      expect(await seqs('upload')).to.deep.equal([]);
    });

    it('"a phrase" matches its words in that order', async () => {
      expect(await seqs('"fix the failing test"')).to.deep.equal([4]);
      expect(await seqs('"test fix"')).to.deep.equal([]);
      const [hit] = (await search(owner, { q: '"failing test"' })).items;
      expect(highlighted(hit!)).to.deep.equal(['failing test']);
    });

    it('-excluded words and phrases leave events out', async () => {
      expect(await seqs('fix -retry')).to.deep.equal([5]);
      expect(await seqs('fix -"failing test"')).to.deep.equal([5]);
    });

    it('prefix* matches words starting with it, identifiers\' words included', async () => {
      expect(await seqs('pars*')).to.deep.equal([2, 3]);
      const hit = (await search(owner, { q: 'pars*' })).items.find((h) => h.seq === 3)!;
      expect(highlighted(hit)).to.deep.equal(['pars', 'pars']);
    });

    it('identifiers and paths match as their words in sequence, and by each word', async () => {
      expect(await seqs('timeutil.py')).to.deep.equal([2]);
      expect(await seqs('utils/timeutil.py')).to.deep.equal([2]);
      expect(await seqs('parse_duration')).to.deep.equal([2, 3]);
      expect(await seqs('parse_duration_ms')).to.deep.equal([2]);
      expect(await seqs('py/timeutil')).to.deep.equal([]);
      expect(await seqs('duration')).to.deep.equal([2, 3]);
      expect(await seqs('parseDuration')).to.deep.equal([3]);
      expect(await seqs('timeutil.rb')).to.deep.equal([]);
      const [hit] = (await search(owner, { q: 'timeutil.py' })).items;
      expect(highlighted(hit!)).to.deep.equal(['timeutil.py']);
    });

    for (const [q, problem] of [
      ['"unclosed', 'a quote is not closed'],
      ['-only', 'at least one term must not be excluded'],
      ['a*b', '* may only end a word'],
      ['...', 'a term needs a letter or a digit'],
      [Array.from({ length: 17 }, (_, i) => `w${i}`).join(' '), 'more than 16 terms'],
    ]) {
      it(`answers 422 naming q for ${JSON.stringify(q!.slice(0, 20))}`, async () => {
        const response = await client.request.get('/api/v1/search/events').query({ q }).set('X-Access-Token', owner.accessToken).expect(422);
        expect(response.body.detail[0].loc).to.deep.equal(['query', 'q']);
        expect(response.body.detail[0].msg).to.include(problem);
        await client.request.get(`/api/v1/conversations/${conversation}/events`).query({ q }).set('X-Access-Token', owner.accessToken).expect(422);
      });
    }

    it('answers 422 naming q when q is missing', async () => {
      const response = await client.request.get('/api/v1/search/events').set('X-Access-Token', owner.accessToken).expect(422);
      expect(response.body.detail[0].loc).to.deep.equal(['query', 'q']);
    });
  });

  describe('any script', () => {
    it('finds Chinese and Japanese by any substring, Cyrillic and Greek without case, Latin without accents', async () => {
      const conversation = randomUUID();
      await post(owner, conversation, [
        message('user', '请修复东京都的上传测试'), // 1
        message('user', 'ファイルを保存できませんでした'), // 2
        message('user', 'Ошибка: НЕ УДАЛОСЬ загрузить файл'), // 3
        message('user', 'Le café est fermé à Zürich'), // 4
        message('user', 'ΟΔΟΣ και οδός'), // 5
        message('user', '한국어 검색이 됩니다'), // 6
      ]);
      await indexer.catchUp();
      const seqs = async (q: string) => (await search(owner, { q })).items.map((hit) => hit.seq).sort();
      expect(await seqs('东京')).to.deep.equal([1]);
      expect(await seqs('东京都的上传')).to.deep.equal([1]);
      expect(await seqs('京')).to.deep.equal([1]);
      expect(await seqs('上传测试 -东京')).to.deep.equal([]);
      expect(await seqs('保存')).to.deep.equal([2]);
      expect(await seqs('保存でき')).to.deep.equal([2]);
      expect(await seqs('保存しない')).to.deep.equal([]);
      expect(await seqs('не удалось')).to.deep.equal([3]);
      expect(await seqs('"не удалось"')).to.deep.equal([3]);
      expect(await seqs('ошиб*')).to.deep.equal([3]);
      expect(await seqs('cafe zurich')).to.deep.equal([4]);
      expect(await seqs('CAFÉ')).to.deep.equal([4]);
      expect(await seqs('οδος')).to.deep.equal([5]);
      expect(await seqs('검색')).to.deep.equal([6]);
      const [hit] = (await search(owner, { q: '上传' })).items;
      expect(highlighted(hit!)).to.deep.equal(['上传']);
      const [greek] = (await search(owner, { q: 'οδος' })).items;
      expect(highlighted(greek!)).to.deep.equal(['ΟΔΟΣ', 'οδός']);
    });
  });

  describe('scope and filters', () => {
    it("never shows another user's events, in hits or counts", async () => {
      const other = await createUserFixture();
      const mine = randomUUID();
      const theirs = randomUUID();
      await post(owner, mine, [message('user', 'shared zebraword mine')]);
      await post(other, theirs, [message('user', 'shared zebraword theirs'), message('user', 'zebraword again')]);
      await indexer.catchUp();
      expect((await search(owner, { q: 'zebraword' })).items.map((hit) => hit.conversation_id)).to.deep.equal([mine]);
      expect(await count(owner, { q: 'zebraword' })).to.equal(1);
      expect(await count(other, { q: 'zebraword' })).to.equal(2);
      expect((await search(owner, { q: 'theirs' })).items).to.deep.equal([]);
      expect((await search(owner, { q: 'zebraword', conversation_id: theirs })).items).to.deep.equal([]);
      expect(await count(owner, { q: 'zebraword', conversation_id: theirs })).to.equal(0);
      await client.request.get(`/api/v1/conversations/${theirs}/events`).query({ q: 'zebraword' }).set('X-Access-Token', owner.accessToken).expect(403);
      await client.request.get(`/api/v1/conversations/${theirs}/events/count`).query({ q: 'zebraword' }).set('X-Access-Token', owner.accessToken).expect(403);
    });

    it('filters by kind, source, conversation and time, and answers each hit with its conversation', async () => {
      const first = randomUUID();
      const second = randomUUID();
      await post(owner, first, [
        { ...message('user', 'zebra from the user'), timestamp: '2026-01-01T10:00:00Z' },
        { ...message('agent', 'zebra from the agent'), timestamp: '2026-01-02T10:00:00Z' },
        minimalEvent('AgentErrorEvent', { id: randomUUID(), error: 'zebra failed', timestamp: '2026-01-03T10:00:00Z' }),
      ]);
      await post(owner, second, [{ ...message('user', 'zebra elsewhere'), timestamp: '2026-01-04T10:00:00Z' }]);
      await indexer.catchUp();
      const seqsOf = async (query: Record<string, string | string[]>) =>
        (await search(owner, { q: 'zebra', ...query })).items.map((hit) => `${hit.conversation_id === first ? 'a' : 'b'}${hit.seq}`);
      expect(await seqsOf({})).to.deep.equal(['b1', 'a3', 'a2', 'a1']);
      expect(await seqsOf({ kind: 'AgentErrorEvent' })).to.deep.equal(['a3']);
      expect(await seqsOf({ kind: ['AgentErrorEvent', 'MessageEvent'], source: 'user' })).to.deep.equal(['b1', 'a1']);
      expect(await seqsOf({ conversation_id: first })).to.deep.equal(['a3', 'a2', 'a1']);
      expect(await seqsOf({ since: '2026-01-02T00:00:00Z', until: '2026-01-03T23:00:00Z' })).to.deep.equal(['a3', 'a2']);
      expect(await count(owner, { q: 'zebra', source: 'user' })).to.equal(2);
      const [hit] = (await search(owner, { q: 'zebra', kind: 'AgentErrorEvent' })).items;
      expect(hit).to.include({ conversation_id: first, seq: 3, kind: 'AgentErrorEvent', timestamp: '2026-01-03T10:00:00.000000Z' });
      expect(hit!.event_id).to.be.a('string');
      expect(highlighted(hit!)).to.deep.equal(['zebra']);
    });
  });

  describe('paging and freshness', () => {
    it('pages newest first without a gap or a duplicate while events arrive', async () => {
      const conversations = [randomUUID(), randomUUID()];
      for (let i = 0; i < 30; i++) await post(owner, conversations[i % 2]!, [message('agent', `zebrapage number ${i}`)]);
      await indexer.catchUp();
      const before = await count(owner, { q: 'zebrapage' });
      expect(before).to.equal(30);
      const seen: string[] = [];
      let cursor: string | null = null;
      let arriving = 0;
      do {
        const page: HitPage = await search(owner, { q: 'zebrapage', limit: '7', ...(cursor ? { cursor } : {}) });
        seen.push(...page.items.map((hit) => hit.snippet.text));
        cursor = page.next_cursor;
        // New matching events, indexed between pages: they come before the first page, never inside the walk.
        await post(owner, conversations[arriving % 2]!, [message('agent', `zebrapage late ${arriving++}`)]);
        await indexer.catchUp();
      } while (cursor);
      expect(seen).to.have.length(30);
      expect(new Set(seen).size).to.equal(30);
      expect(seen[0]).to.equal('zebrapage number 29');
      expect(seen[29]).to.equal('zebrapage number 0');
      expect(await count(owner, { q: 'zebrapage' })).to.equal(30 + arriving);
    });

    it('finds nothing before the indexer has run, and says so with indexed_through', async () => {
      const conversation = randomUUID();
      const start = new Date().toISOString();
      await post(owner, conversation, [message('user', 'zebrafresh news')]);
      const pending = await search(owner, { q: 'zebrafresh' });
      expect(pending.items).to.deep.equal([]);
      expect(pending.indexed_through <= new Date().toISOString()).to.equal(true);
      expect(pending.indexed_through.slice(0, 19) >= start.slice(0, 19)).to.equal(true);
      await indexer.catchUp();
      const indexed = await search(owner, { q: 'zebrafresh' });
      expect(indexed.items).to.have.length(1);
      expect(indexed.indexed_through > pending.indexed_through).to.equal(true);
    });

    it('refuses a cursor of another search', async () => {
      const conversation = randomUUID();
      await post(owner, conversation, [message('user', 'zebra one'), message('user', 'zebra two')]);
      await indexer.catchUp();
      const page = await search(owner, { q: 'zebra', limit: '1' });
      const response = await client.request
        .get('/api/v1/search/events')
        .query({ q: 'one', cursor: page.next_cursor! })
        .set('X-Access-Token', owner.accessToken)
        .expect(422);
      expect(response.body.detail[0].loc).to.deep.equal(['query', 'cursor']);
    });

    it('indexes by binary COPY after the last index row: a mark behind the index rows indexes nothing twice', async () => {
      const sql = async <T>(query: string, values: unknown[] = []) => (await testDatabase().orm.em.getConnection().execute(query, values)) as T[];
      const conversation = randomUUID();
      await post(owner, conversation, [message('user', 'zebracopy parseDuration Straße 東京都 it\'s a\\b'), message('agent', 'zebracopy two')]);
      await indexer.catchUp();
      const rows = () =>
        sql<{ seq: number; lexemes: string; exact: boolean; ordinal: string }>(
          `select s.seq, s.lexemes::text as lexemes, s.event_time = e.event_time as exact, s.ordinal::text as ordinal
           from event_search s join conversation_events e using (conversation_id, seq) where s.conversation_id = ? order by s.seq`,
          [conversation],
        );
      const copied = await rows();
      expect(copied.map((row) => row.exact)).to.deep.equal([true, true]);
      // The mark moved back over indexed events (as one the indexer could not move leaves it).
      await post(owner, conversation, [message('agent', 'zebracopy three')]);
      await sql('update conversations set search_from = 1 where id = ?', [conversation]);
      await indexer.catchUp();
      const after = await rows();
      expect(after.slice(0, 2)).to.deep.equal(copied);
      expect(after).to.have.length(3);
      expect(after[2]!.exact).to.equal(true);
      const [mark] = await sql<{ search_from: number | null }>('select search_from from conversations where id = ?', [conversation]);
      expect(mark!.search_from).to.equal(null);
      const [literal] = await sql<{ lexemes: string }>(
        `select ?::tsvector::text as lexemes`,
        [(await import('../../src/search/text.ts')).indexVector('zebracopy parseDuration Straße 東京都 it\'s a\\b')],
      );
      expect(copied[0]!.lexemes).to.equal(literal!.lexemes);
      expect(await count(owner, { q: 'zebracopy' })).to.equal(3);
      expect(await count(owner, { q: '"parse duration"' })).to.equal(1);
      expect(await count(owner, { q: '京都' })).to.equal(1);
    });

    it('does not wait for a conversation the webhook holds: indexes its events, leaves its mark, and moves it once free', async () => {
      const sql = async <T>(query: string, values: unknown[] = []) => (await testDatabase().orm.em.getConnection().execute(query, values)) as T[];
      await indexer.catchUp();
      const [held, free] = [randomUUID(), randomUUID()];
      await post(owner, held, [message('user', 'zebraheld one'), message('agent', 'zebraheld two')]);
      await post(owner, free, [message('user', 'zebraheld three')]);
      const marks = async () =>
        Object.fromEntries(
          (await sql<{ id: string; search_from: number | null }>('select id, search_from from conversations where id in (?, ?)', [held, free])).map((row) => [row.id, row.search_from]),
        );
      const webhook = await testDatabase().orm.em.getConnection().getKnex().transaction();
      try {
        // As the ingest holds a conversation it stores into.
        await webhook.raw('select id from conversations where id = ? for update', [held]);
        const cycle = await Promise.race([indexer.indexOnce(), new Promise((resolve) => setTimeout(resolve, 5_000, 'waited'))]);
        expect(cycle).to.deep.include({ skipped: false, events: 3 });
        expect(await marks()).to.deep.equal({ [held]: 1, [free]: null });
      } finally {
        await webhook.rollback();
      }
      expect(await count(owner, { q: 'zebraheld' })).to.equal(3);
      expect(await indexer.catchUp()).to.equal(0);
      expect(await marks()).to.deep.equal({ [held]: null, [free]: null });
      expect(await count(owner, { q: 'zebraheld' })).to.equal(3);
    });

    it('removes the index rows of deleted events (retention)', async () => {
      const conversation = randomUUID();
      await post(owner, conversation, [message('user', 'zebragone soon'), message('user', 'zebragone too')]);
      await indexer.catchUp();
      expect(await count(owner, { q: 'zebragone' })).to.equal(2);
      await deleteEventBatch(testDatabase().orm.em, conversation, 1000);
      expect(await count(owner, { q: 'zebragone' })).to.equal(0);
      const [row] = await testDatabase().orm.em.getConnection().execute('select count(*)::integer as n from event_search');
      expect(row!.n).to.equal(0);
    });
  });
});

describe('GET /api/v1/conversations/{conversation_id}/events?q=', () => {
  let client: TestApp;
  let owner: UserFixture;
  let indexer: SearchIndexer;
  before(async () => {
    client = await createTestApp();
    indexer = new SearchIndexer(testDatabase().orm.em, testConfig().search, createLogger('silent'));
  });

  it('narrows the list in both orders, pages and counts consistently', async () => {
    owner = await createUserFixture();
    const conversation = randomUUID();
    const events = Array.from({ length: 25 }, (_, i) => message('agent', i % 3 === 0 ? `zebra step ${i}` : `other step ${i}`));
    await postEvents(client, owner.sessionApiKey, conversation, events).expect(200);
    await indexer.catchUp();
    const expected = events.map((_, i) => i + 1).filter((seq) => (seq - 1) % 3 === 0);
    for (const order of ['asc', 'desc'] as const) {
      const seen: number[] = [];
      let cursor: string | null = null;
      do {
        const response: { body: { items: { seq: number }[]; indexed_through: string; next_cursor: string | null } } = await client.request
          .get(`/api/v1/conversations/${conversation}/events`)
          .query({ q: 'zebra', order, limit: 4, ...(cursor ? { cursor } : {}) })
          .set('X-Access-Token', owner.accessToken)
          .expect(200);
        seen.push(...(response.body.items as { seq: number }[]).map((item) => item.seq));
        expect(response.body.indexed_through).to.be.a('string');
        cursor = response.body.next_cursor;
      } while (cursor);
      expect(seen).to.deep.equal(order === 'asc' ? expected : [...expected].reverse());
    }
    const counted = await client.request
      .get(`/api/v1/conversations/${conversation}/events/count`)
      .query({ q: 'zebra' })
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    expect(counted.body.count).to.equal(expected.length);
    const narrowed = await client.request
      .get(`/api/v1/conversations/${conversation}/events/count`)
      .query({ q: 'step -zebra', after_seq: 10 })
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    expect(narrowed.body.count).to.equal(events.slice(10).filter((_, i) => (i + 10) % 3 !== 0).length);
    const plain = await client.request.get(`/api/v1/conversations/${conversation}/events`).query({ limit: 1 }).set('X-Access-Token', owner.accessToken).expect(200);
    expect(plain.body).to.not.have.property('indexed_through');
  });
});
