/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// DOM types for the callbacks that run in the page (page.evaluate).
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';
import type { Page } from 'playwright-core';
import { minimalEvent } from '../fixtures/events.ts';
import { browserSuite, expectAccessible, expectFitsPhone, photograph, SCREENSHOTS } from '../helpers/browser.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { createTestApp } from '../helpers/app.ts';
import { testDatabase } from '../helpers/hooks.ts';
import { rememberSecret } from '../helpers/secret-scan.ts';
import { postEvents, webhookPath } from '../helpers/webhook.ts';
import { WebhookSubscriber } from '../helpers/webhook-subscriber.ts';

/** One event of each SDK class, as the agent-server sends them (see fixtures/agent-server/generator). */
const SDK_EVENTS = JSON.parse(fs.readFileSync(path.join(import.meta.dirname, '..', 'fixtures', 'agent-server', 'events.json'), 'utf8')) as Record<string, unknown>[];
/**
 * The card each action and observation class of the fixtures is drawn as. A class missing here (a
 * new SDK class in regenerated fixtures) fails the test instead of silently becoming raw JSON.
 */
const CARD_OF_CLASS: Record<string, string> = {
  TerminalAction: 'terminal',
  TerminalObservation: 'terminal',
  FileEditorAction: 'file-edit',
  FileEditorObservation: 'file-edit',
  ConsultTomAction: 'tool-call',
  ClientAction_open_url: 'tool-call',
  FinishAction: 'finish',
  FinishObservation: 'finish',
};
/** Every action class the contract lists (`ActionKind`): each must have a card of its own. */
const ACTION_KINDS = (parse(fs.readFileSync(path.join(import.meta.dirname, '..', '..', 'spec', 'openapi.yaml'), 'utf8')) as { components: { schemas: { ActionKind: { enum: string[] } } } }).components.schemas.ActionKind.enum;
/** A 1×1 PNG, as a browser tool's screenshot. */
const PIXEL_PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';

/**
 * The web console as a person uses it: headless Chromium against a real listening server. Each
 * page is checked with axe-core and photographed at 1280 and 375 px wide.
 */
describe('console in a browser (headless Chromium)', function () {
  this.timeout(120_000);
  const suite = browserSuite();
  let user: UserFixture;
  let page: Page;

  beforeEach(async () => {
    user = await createUserFixture();
    page = await suite.newPage();
  });

  async function post(conversationId: string, events: unknown[], who = user): Promise<void> {
    const response = await fetch(`${suite.baseUrl}${webhookPath(conversationId)}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': who.sessionApiKey },
      body: JSON.stringify(events),
    });
    expect(response.status, await response.clone().text()).to.equal(200);
  }

  /** Posts the conversation's info as the agent-server does; `cost` (USD) is charged to one LLM usage. */
  async function titled(conversationId: string, title: string, status = 'running', cost?: number): Promise<void> {
    const model = 'anthropic/claude-sonnet-4-5';
    const stats = cost === undefined ? undefined : { usage_to_metrics: { agent: { model_name: model, accumulated_cost: cost } } };
    const response = await fetch(`${suite.baseUrl}/api/v1/webhooks/conversations`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
      body: JSON.stringify({ id: conversationId, title, execution_status: status, metrics: { model_name: model, accumulated_cost: cost ?? 0 }, stats }),
    });
    expect(response.status, await response.clone().text()).to.be.oneOf([200, 201]);
  }

  const message = (text: string, source: 'user' | 'agent' = 'user') =>
    minimalEvent('MessageEvent', { id: randomUUID(), source, llm_message: { role: source === 'user' ? 'user' : 'assistant', content: [{ type: 'text', text }] } });

  const signIn = (token = user.accessToken, hash = '') => suite.signIn(page, token, hash);

  /**
   * A conversation of `count` messages (`event n`, user and agent taking turns): the first posted,
   * the others written straight to the database, much faster than posting them.
   */
  async function longConversation(count: number): Promise<string> {
    const conversationId = randomUUID();
    await post(conversationId, [message('event 1')]);
    const connection = testDatabase().orm.em.getConnection();
    await connection.execute(
      `insert into conversation_events (conversation_id, seq, event_id, kind, event_time, source, payload)
       select ?, n, 'e' || n, 'MessageEvent', now(), case when n % 2 = 0 then 'agent' else 'user' end,
         json_build_object('kind', 'MessageEvent', 'id', 'e' || n, 'source', case when n % 2 = 0 then 'agent' else 'user' end,
           'llm_message', json_build_object('role', case when n % 2 = 0 then 'assistant' else 'user' end, 'content', json_build_array(json_build_object('type', 'text', 'text', 'event ' || n))))
       from generate_series(2, ?) n`,
      [conversationId, count],
    );
    await connection.execute('update conversations set event_count = ? where id = ?', [count, conversationId]);
    return conversationId;
  }

  /** An action and its observation, for the viewer's cards. */
  function step(tool: string, action: Record<string, unknown>, observation?: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown>[] {
    const id = randomUUID();
    const actionEvent = minimalEvent('ActionEvent', { id, tool_name: tool, action, summary: null, security_risk: 'UNKNOWN', llm_response_id: `resp-${id}`, ...extra });
    if (!observation) return [actionEvent];
    return [actionEvent, minimalEvent('ObservationEvent', { id: randomUUID(), action_id: id, tool_name: tool, observation })];
  }
  const text = (value: string) => [{ type: 'text', text: value }];

  it('is usable by keyboard: skip link first, links and buttons reachable, Enter opens a conversation', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [message('keyboard')]);
    await titled(conversationId, 'Reached by keyboard');
    await signIn();
    await page.locator('#conversations a').first().waitFor();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).to.equal('Skip to content');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.id)).to.equal('main');
    // Through the search form's fields to the first conversation.
    for (let i = 0; i < 20 && (await page.evaluate(() => document.activeElement?.textContent)) !== 'Reached by keyboard'; i++) await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).to.equal('Reached by keyboard');
    await page.keyboard.press('Enter');
    await page.locator('#conversation-title', { hasText: 'Reached by keyboard' }).waitFor();
  });

  describe('GET /', () => {
    it('loads the console quickly (first load, cold cache)', async () => {
      const context = await suite.browser.newContext();
      const fresh = await context.newPage();
      const started = Date.now();
      await fresh.goto(`${suite.baseUrl}/`);
      await fresh.locator('#token').waitFor();
      const elapsed = Date.now() - started;
      const timing = await fresh.evaluate(() => {
        const [navigation] = performance.getEntriesByType('navigation') as PerformanceNavigationTiming[];
        const script = performance.getEntriesByType('resource').find((entry) => new URL(entry.name).pathname.endsWith('console.js')) as PerformanceResourceTiming | undefined;
        return { domContentLoaded: navigation!.domContentLoadedEventEnd, scriptBytes: script?.encodedBodySize ?? 0 };
      });
      console.log(`      first load to the sign-in form: ${elapsed} ms (DOMContentLoaded ${Math.round(timing.domContentLoaded)} ms, console.js ${(timing.scriptBytes / 1024).toFixed(1)} KiB on the wire)`);
      expect(elapsed).to.be.below(10_000);
      await context.close();
    });


    it('serves the console page with a strict Content-Security-Policy and no inline script', async () => {
      const response = await fetch(`${suite.baseUrl}/`);
      expect(response.status).to.equal(200);
      const csp = response.headers.get('content-security-policy')!;
      expect(csp).to.include("script-src 'self'").and.not.include('unsafe');
      const html = await response.text();
      expect(html).to.not.match(/<script(?![^>]*\bsrc=)[^>]*>/);
      const script = await fetch(`${suite.baseUrl}/console/console.js`);
      expect(script.status).to.equal(200);
      expect(script.headers.get('content-type')).to.match(/^text\/javascript/);
      const styles = await fetch(`${suite.baseUrl}/console/console.css`);
      expect(styles.headers.get('content-type')).to.match(/^text\/css/);
    });
  });

  it('signs in with an access token, lists conversations, and signs out', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [message('List the files')]);
    await titled(conversationId, 'List the repository files');
    await page.goto(`${suite.baseUrl}/`);
    await expectAccessible(page);
    await photograph(page, 'sign-in');
    await page.fill('#token', 'apat_not-a-real-token');
    await page.click('#sign-in button[type=submit]');
    expect(await page.locator('.notice.error').textContent()).to.include('not valid');
    await page.fill('#token', user.accessToken);
    await page.click('#sign-in button[type=submit]');
    const link = page.locator('#conversations a', { hasText: 'List the repository files' });
    await link.waitFor();
    expect(await page.locator('#conversations .badge').first().textContent()).to.equal('running');
    expect(await page.locator('button', { hasText: 'Load more' }).isVisible(), 'one page only').to.equal(false);
    await expectAccessible(page);
    await photograph(page, 'conversations');
    expect(await page.evaluate(() => sessionStorage.length)).to.equal(1);
    await page.click('#sign-out');
    await page.locator('#token').waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).to.equal(0);
    expect(suite.errors).to.deep.equal([]);
  });

  it('returns to sign-in with a sentence when the token stops working (401)', async () => {
    await signIn();
    await testDatabase().orm.em.getConnection().execute('update credentials set revoked_at = now() where user_id = ?', [user.userId]);
    // Whichever call comes next (the list's, the account page's) gets the 401.
    await page.evaluate(() => (location.hash = '#/account'));
    await page.locator('#token').waitFor();
    expect(await page.locator('.notice').textContent()).to.include('sign in again');
    // A later redraw (another link followed, a late answer of the page before) still says why.
    await page.evaluate(() => (location.hash = '#/conversations'));
    await page.locator('#token').waitFor();
    expect(await page.locator('.notice').textContent()).to.include('sign in again');
    await expectAccessible(page);
    await photograph(page, 'signed-out');
  });

  it('shows a conversation as a conversation: messages as text, actions as cards with their results', async () => {
    const conversationId = randomUUID();
    const action = minimalEvent('ActionEvent', { id: randomUUID() });
    const observation = minimalEvent('ObservationEvent', { id: randomUUID(), action_id: action.id });
    await post(conversationId, [
      minimalEvent('SystemPromptEvent', { id: randomUUID() }),
      message('Please **list** the files in `/workspace`'),
      action,
      observation,
      minimalEvent('AgentErrorEvent', { id: randomUUID() }),
      minimalEvent('Condensation', { id: randomUUID() }),
      minimalEvent('HookExecutionEvent', { id: randomUUID() }),
      message('Here are the files:\n\n- README.md\n- src/\n\n```sh\nls -la\n```', 'agent'),
      { ...message('First try', 'agent'), parent_id: 'branch-point' },
      { ...message('Second try', 'agent'), parent_id: 'branch-point' },
    ]);
    await titled(conversationId, 'List the repository files', 'running', 0.0123);
    await signIn(user.accessToken, `#/conversations/${conversationId}`);
    const userText = page.locator('.message.user .text').first();
    await userText.waitFor();
    expect(await userText.textContent()).to.equal('Please list the files in /workspace');
    expect(await page.locator('.message.user strong').textContent()).to.equal('list');
    expect(await page.locator('.message.agent li').allTextContents()).to.deep.equal(['README.md', 'src/']);
    expect(await page.locator('.card.action .command').textContent()).to.equal('$ ls -la');
    expect(await page.locator('.card.action .result .output').textContent()).to.equal('README.md\n');
    expect(await page.locator('.risk').textContent()).to.equal('low risk');
    expect(await page.locator('details.thinking').count()).to.be.at.least(1);
    expect(await page.locator('details.thinking[open]').count()).to.equal(0);
    expect(await page.locator('.card.error').textContent()).to.include('Tool terminal failed: timeout');
    expect(await page.locator('.divider', { hasText: 'Context condensed' }).count()).to.equal(1);
    expect(await page.locator('details.hook').textContent()).to.include('PreToolUse');
    expect(await page.textContent('#conversation-title')).to.equal('List the repository files');
    expect(await page.textContent('.facts')).to.include('anthropic/claude-sonnet-4-5').and.include('$0.0123');
    expect(await page.locator('.scroller').textContent()).to.not.include('"kind"');
    expect(await page.locator('.row.branch .branch-label').allTextContents()).to.deep.equal(['Branch 1 of 2', 'Branch 2 of 2']);
    // The outline reads a message's words, not its Markdown.
    expect(await page.locator('.outline-entry .outline-label').first().textContent()).to.equal('User: Please list the files in /workspace');
    await page.locator('.connection[data-state="live"]').waitFor();
    await expectAccessible(page);
    await photograph(page, 'conversation');
    expect(suite.errors).to.deep.equal([]);
  });

  it('draws a specific card for every action and observation class of the agent-server fixtures', async () => {
    const conversationId = randomUUID();
    await post(conversationId, SDK_EVENTS);
    await titled(conversationId, 'Every SDK class', 'finished', 0.0012);
    await page.setViewportSize({ width: 1280, height: 6000 });
    await signIn(user.accessToken, `#/conversations/${conversationId}`);
    await page.locator('.row[data-kind="ServerErrorEvent"]').waitFor();
    const classes = SDK_EVENTS.flatMap((event) => {
      const inner = (event.action ?? event.observation) as { kind?: string } | undefined;
      return inner?.kind ? [{ kind: inner.kind, side: event.action ? 'action' : 'observation' }] : [];
    });
    expect(classes.length).to.be.at.least(8);
    for (const { kind, side } of classes) {
      expect(CARD_OF_CLASS, `a card for ${kind}`).to.have.property(kind);
      const card = page.locator(`[data-${side}="${kind}"]`);
      expect(await card.count(), `${kind} is drawn`).to.equal(1);
      expect(await card.getAttribute('data-card'), `${kind}'s card`).to.equal(CARD_OF_CLASS[kind]);
    }
    expect(await page.locator('[data-card="raw"]').count(), 'classes drawn as raw JSON').to.equal(0);
    // The str_replace as a diff, numbered from the file the observation carries; signs beside colours.
    const edit = page.locator('[data-action="FileEditorAction"]');
    expect(await edit.locator('.file-path').textContent()).to.equal('/workspace/a.py');
    expect(await edit.locator('.diff-line.del .diff-text').allTextContents()).to.deep.equal(['x = 1']);
    expect(await edit.locator('.diff-line.add .diff-text').allTextContents()).to.deep.equal(['x = 2']);
    expect(await edit.locator('.diff-line.del .sign').textContent()).to.match(/^−/);
    expect(await edit.locator('.diff-line.add .sign').textContent()).to.match(/^\+/);
    expect(await edit.locator('.diff-line.add .ln').allTextContents()).to.deep.equal(['', '1']);
    // The terminal: command, exit code, how long it took (its timestamps are one second apart).
    const terminal = page.locator('[data-action="TerminalAction"]');
    expect(await terminal.locator('.command').textContent()).to.equal('$ printf "a\\0b"');
    expect(await terminal.locator('.exit').textContent()).to.include('exit 0');
    expect(await terminal.locator('.took').textContent()).to.equal('took 1.0 s');
    // Its LLM response's cost, from the completion log.
    expect(await terminal.locator('.usage').textContent()).to.include('$0.0012');
    // Finish: the message once, as Markdown, not JSON.
    const finish = page.locator('[data-action="FinishAction"]');
    expect(await finish.locator('.note-text').textContent()).to.equal('done');
    expect((await finish.textContent())!.match(/done/g)).to.have.length(1);
    expect(await page.locator('.scroller').textContent()).to.not.include('"kind"');
    // Times are the events' own, not when they were received.
    const first = page.locator('.row[data-kind="MessageEvent"] time').first();
    expect(await first.getAttribute('datetime')).to.equal('2026-11-23T18:00:01.001Z');
    expect(await first.getAttribute('data-source')).to.equal('agent');
    expect(await page.locator('[data-card="condensation"]').textContent()).to.include('1 earlier event');
    expect(await page.locator('[data-card="rejection"]').textContent()).to.include('Blocked by hook');
    expect(await page.locator('[data-card="hook"]').textContent()).to.include('blocked');
    expect(await page.locator('[data-card="error"]').count()).to.equal(3);
    // The header: the duration of the run from the first event to the last.
    expect(await page.textContent('#run-duration')).to.equal('26 s');
    expect(await page.locator('.outline-entry').count()).to.equal(6);
    await expectAccessible(page);
    await edit.screenshot({ path: path.join(SCREENSHOTS, 'viewer-diff-1280.png') });
    await page.emulateMedia({ colorScheme: 'dark' });
    await edit.screenshot({ path: path.join(SCREENSHOTS, 'viewer-diff-1280-dark.png') });
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1280, height: 800 });
    await photograph(page, 'viewer-sdk-classes');
    expect(suite.errors).to.deep.equal([]);
  });

  it('draws every action class of the contract and the other tool families from their own fields; an unknown class is folded raw JSON, as text', async () => {
    const conversationId = randomUUID();
    const longDiff = Array.from({ length: 100 }, (_, i) => `line ${i}`).join('\n');
    await post(conversationId, [
      ...step('think', { kind: 'ThinkAction', thought: 'First **plan**, then act.' }, { kind: 'ThinkObservation', content: text('Your thought has been logged.') }),
      ...step('task_tracker', { kind: 'TaskTrackerAction', command: 'plan', task_list: [{ title: 'Write tests', notes: '', status: 'done' }, { title: 'Ship', notes: 'after review', status: 'in_progress' }, { title: 'Celebrate', notes: '', status: 'todo' }] }, { kind: 'TaskTrackerObservation', content: text('Task list updated'), command: 'plan', task_list: [] }),
      ...step('browser_navigate', { kind: 'BrowserNavigateAction', url: 'https://example.com/docs', new_tab: false }, { kind: 'BrowserObservation', content: text('Example Domain'), screenshot_data: PIXEL_PNG }),
      ...step('fetch_weather', { kind: 'MCPToolAction', data: { city: 'Lisbon', days: 3 } }, { kind: 'MCPToolObservation', content: text('sunny'), is_error: false, tool_name: 'fetch_weather' }),
      ...step('delegate', { kind: 'DelegateAction', command: 'spawn', ids: ['researcher'] }, { kind: 'DelegateObservation', content: text('spawned researcher') }),
      ...step('apply_patch', { kind: 'ApplyPatchAction', patch: '*** Begin Patch\n*** Update File: src/app.ts\n@@ function main\n   keep()\n-  old()\n+  renewed()\n*** End Patch' }, { kind: 'ApplyPatchObservation', content: text('Done!') }),
      ...step('file_editor', { kind: 'FileEditorAction', command: 'create', path: '/w/NEW.md', file_text: '# Title\nbody\n' }, { kind: 'FileEditorObservation', content: text('File created'), command: 'create', path: '/w/NEW.md', prev_exist: false, old_content: null, new_content: '# Title\nbody\n' }),
      ...step('file_editor', { kind: 'FileEditorAction', command: 'insert', path: '/w/a.py', insert_line: 10, new_str: 'x = 1\ny = 2' }),
      ...step('file_editor', { kind: 'FileEditorAction', command: 'view', path: '/w/a.py', view_range: [5, 20] }),
      ...step('file_editor', { kind: 'FileEditorAction', command: 'str_replace', path: '/w/long.txt', old_str: longDiff, new_str: longDiff.replaceAll('line', 'row') }),
      ...step('terminal', { kind: 'TerminalAction', command: 'seq 40', is_input: false, timeout: null, reset: false }, { kind: 'TerminalObservation', content: text(Array.from({ length: 40 }, (_, i) => String(i + 1)).join('\n')), exit_code: 0, is_error: false, timeout: false }),
      // Every action class the contract lists, with an observation of the matching name.
      ...ACTION_KINDS.flatMap((kind) => step(`tool_${kind}`, { kind }, { kind: kind.replace(/Action$/, 'Observation'), content: text(`${kind} result`) })),
      // An observation class from a newer SDK (observations are stored whatever their kind).
      ...step('quantum', { kind: 'TerminalAction', command: 'qsim' }, { kind: 'QuantumObservation', qubits: '<b>two</b>' }),
      minimalEvent('MessageEvent', { id: randomUUID(), source: 'user', timestamp: 'not a date', llm_message: { role: 'user', content: text('no time of its own') } }),
    ]);
    // Tall enough for every row to be rendered at once.
    await page.setViewportSize({ width: 1280, height: 20_000 });
    await signIn(user.accessToken, `#/conversations/${conversationId}`);
    await page.locator('.row', { hasText: 'no time of its own' }).waitFor();
    for (const kind of ACTION_KINDS) {
      const card = page.locator(`.card[data-action="${kind}"]`, { has: page.locator('.tool', { hasText: `tool_${kind}` }) });
      expect(await card.getAttribute('data-card'), `${kind}'s card`).to.not.equal('raw');
      expect(await card.locator('.result').getAttribute('data-card'), `${kind}'s observation`).to.not.equal('raw');
    }
    expect(await page.locator('.card[data-card="think"]').first().locator('.note-text strong').textContent()).to.equal('plan');
    expect(await page.locator('.card[data-card="think"]').first().textContent()).to.not.include('logged');
    expect(await page.locator('.card[data-card="task-tracker"]').first().locator('.task-title').allTextContents()).to.deep.equal(['Write tests', 'Ship', 'Celebrate']);
    expect(await page.locator('.card[data-card="task-tracker"]').first().locator('.task-state').allTextContents()).to.deep.equal(['done', 'in progress', 'to do']);
    const browserCard = page.locator('[data-card="browser"]').first();
    expect(await browserCard.locator('a[href="https://example.com/docs"]').count()).to.equal(1);
    expect(await browserCard.locator('img.screenshot').evaluate((image: HTMLImageElement) => image.decode().then(() => image.naturalWidth))).to.equal(1);
    const mcp = page.locator('[data-action="MCPToolAction"]').first();
    expect(await mcp.locator('.tool').textContent()).to.equal('fetch_weather');
    expect(await mcp.locator('table.args th').allTextContents()).to.deep.equal(['city', 'days']);
    expect(await mcp.locator('table.args td').allTextContents()).to.deep.equal(['Lisbon', '3']);
    expect(await mcp.locator('.result .output').textContent()).to.equal('sunny');
    expect(await page.locator('[data-action="DelegateAction"]').first().locator('table.args').textContent()).to.include('researcher');
    const patch = page.locator('[data-action="ApplyPatchAction"]').first();
    expect(await patch.locator('.file-path').textContent()).to.equal('src/app.ts');
    expect(await patch.locator('.diff-line.del .diff-text').allTextContents()).to.deep.equal(['  old()']);
    expect(await patch.locator('.diff-line.add .diff-text').allTextContents()).to.deep.equal(['  renewed()']);
    const created = page.locator('[data-action="FileEditorAction"]', { hasText: 'NEW.md' });
    expect(await created.locator('.diff-line.add .diff-text').allTextContents()).to.deep.equal(['# Title', 'body']);
    const inserted = page.locator('[data-action="FileEditorAction"]', { hasText: 'Insert into' });
    expect(await inserted.locator('.diff-line.add .ln:nth-child(2)').allTextContents()).to.deep.equal(['11', '12']);
    expect(await page.locator('[data-action="FileEditorAction"]', { hasText: 'lines 5–20' }).locator('.path').textContent()).to.include('lines 5–20');
    // A long diff is folded; the rest is one click away.
    const long = page.locator('[data-action="FileEditorAction"]', { hasText: 'long.txt' });
    expect(await long.locator('.diff-line').count()).to.equal(40);
    await long.locator('.diff-more').click();
    expect(await long.locator('.diff-line.add').count()).to.equal(100);
    await page.locator('.card[data-card="task-tracker"]').first().screenshot({ path: path.join(SCREENSHOTS, 'viewer-tasks-1280.png') });
    await patch.screenshot({ path: path.join(SCREENSHOTS, 'viewer-patch-1280.png') });
    const terminal = page.locator('.card[data-card="terminal"]', { hasText: 'seq 40' });
    expect(await terminal.locator('pre.folded-output').count()).to.equal(1);
    expect(await terminal.locator('button', { hasText: 'Show all output' }).count()).to.equal(1);
    const unknown = page.locator('.result[data-observation="QuantumObservation"]');
    expect(await unknown.getAttribute('data-card')).to.equal('raw');
    expect(await unknown.locator('details.raw-json[open]').count()).to.equal(0);
    expect(await unknown.locator('summary').textContent()).to.equal('Unknown observation QuantumObservation');
    expect(await unknown.locator('pre.raw').textContent()).to.include('"qubits": "<b>two</b>"');
    expect(await unknown.locator('b').count()).to.equal(0);
    expect(await page.locator('.row', { hasText: 'no time of its own' }).locator('time').getAttribute('data-source')).to.equal('received');
    await expectAccessible(page);
    await page.setViewportSize({ width: 1280, height: 800 });
    await photograph(page, 'viewer-tool-families');
    expect(suite.errors).to.deep.equal([]);
  });

  it('opens at an event from its link, moves between steps with j and k, and jumps from the outline', async () => {
    const conversationId = await longConversation(1500);
    await signIn(user.accessToken, `#/conversations/${conversationId}/events/50`);
    await page.locator('.row.current[data-seq="50"]').waitFor();
    expect(await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.seq)).to.equal('50');
    await page.keyboard.press('j');
    await page.locator('.row.current[data-seq="51"]').waitFor();
    await page.keyboard.press('k');
    await page.keyboard.press('k');
    await page.locator('.row.current[data-seq="49"]').waitFor();
    // A link to another event of the same conversation moves within it.
    await page.locator('.row[data-seq="49"] a.permalink').click();
    expect(page.url()).to.match(/\/events\/49$/);
    await page.evaluate((id) => (location.hash = `#/conversations/${id}/events/1400`), conversationId);
    await page.locator('.row.current[data-seq="1400"]').waitFor();
    await page.locator('.outline-entry', { hasText: 'event 1500' }).click();
    await page.locator('.row.current[data-seq="1500"]').waitFor();
    expect(await page.locator('.row[data-seq]').count(), 'rows in the DOM').to.be.below(200);
    await page.evaluate((id) => (location.hash = `#/conversations/${id}/events/9999`), conversationId);
    await page.locator('.notice.error', { hasText: 'Event #9999' }).waitFor();
    expect(suite.errors).to.deep.equal([]);
  });

  it('updates the header live (events, last event, duration) and says it is receiving', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [{ ...message('start'), timestamp: '2026-11-23T18:00:00' }]);
    await titled(conversationId, 'Live header', 'running', 0.5);
    await signIn(user.accessToken, `#/conversations/${conversationId}`);
    await page.locator('.connection[data-state="live"]').waitFor();
    expect(await page.textContent('.connection')).to.equal('Receiving new events');
    expect(await page.textContent('#event-count')).to.equal('1');
    await post(conversationId, [{ ...message('two', 'agent'), timestamp: '2026-11-23T18:01:30' }, { ...message('three'), timestamp: '2026-11-23T18:02:05' }]);
    await page.locator('#event-count', { hasText: '3' }).waitFor({ timeout: 5000 });
    await page.locator('#run-duration', { hasText: '2 min 5 s' }).waitFor({ timeout: 5000 });
    expect(await page.locator('.idle-gap').allTextContents()).to.deep.equal(['idle 1 min 30 s', 'idle 35 s']);
    expect(await page.textContent('.facts')).to.include('$0.50');
    expect(suite.errors).to.deep.equal([]);
  });

  it('fits a 375 px phone on every page (no sideways overflow) and passes axe on each', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    const conversationId = randomUUID();
    await post(conversationId, SDK_EVENTS, admin);
    await page.goto(`${suite.baseUrl}/`);
    await expectFitsPhone(page);
    await signIn(admin.accessToken);
    await page.locator('#conversations a').first().waitFor();
    await expectFitsPhone(page);
    await page.evaluate((id) => (location.hash = `#/conversations/${id}`), conversationId);
    await page.locator('.row[data-kind="ServerErrorEvent"]').waitFor();
    await expectFitsPhone(page);
    await page.evaluate(() => (location.hash = '#/account'));
    await page.fill('#key-name', 'phone');
    await page.click('#create-key button[type=submit]');
    rememberSecret((await page.locator('#new-secret').textContent())!);
    await page.locator('#spend-title').waitFor();
    await expectFitsPhone(page);
    await page.evaluate(() => (location.hash = '#/admin'));
    await page.locator('#users tbody tr').first().waitFor();
    await page.locator('#audit-log tbody tr').first().waitFor();
    await expectFitsPhone(page);
    await photograph(page, 'admin-phone');
    expect(suite.errors).to.deep.equal([]);
  });

  it('follows a conversation live: a delta is typed into a pending message, then events and status arrive', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [message('Say hello')]);
    await signIn(user.accessToken, `#/conversations/${conversationId}`);
    await page.locator('.connection[data-state="live"]').waitFor();
    await post(conversationId, [minimalEvent('StreamingDeltaEvent', { content: 'Hel' }), minimalEvent('StreamingDeltaEvent', { content: 'lo' })]);
    await page.locator('#pending .text', { hasText: 'Hello' }).waitFor({ timeout: 10_000 });
    await post(conversationId, [message('Hello there', 'agent'), minimalEvent('PauseEvent', { id: randomUUID() })]);
    await page.locator('.message.agent .text', { hasText: 'Hello there' }).waitFor({ timeout: 10_000 });
    expect(await page.locator('#pending').count()).to.equal(0);
    await page.locator('#live-status .badge[data-status="paused"]').waitFor({ timeout: 10_000 });
    expect(suite.errors).to.deep.equal([]);
  });

  it('renders a hostile agent message inert and fast (<img onerror>, javascript: link, a 1 MB line)', async () => {
    const conversationId = randomUUID();
    const hostile = [
      'Look: <img src=x onerror="window.__owned=1;alert(1)"> and <script>window.__owned=2</script>',
      '[click me](javascript:window.__owned=3) and ![x](javascript:alert(1)) and [ok](https://example.com/docs)',
      `<a href="javascript:alert(1)">raw link</a>`,
      'A'.repeat(1024 * 1024),
    ].join('\n\n');
    await post(conversationId, [message(hostile, 'agent'), message('after the hostile one')]);
    await signIn();
    const started = Date.now();
    await page.goto(`${suite.baseUrl}/#/conversations/${conversationId}`);
    await page.locator('.message.user .text', { hasText: 'after the hostile one' }).waitFor();
    const elapsed = Date.now() - started;
    console.log(`      opened with the hostile message in ${elapsed} ms`);
    // A bound that catches a hang (a shared CI machine varies); the figure is printed above.
    expect(elapsed, 'opening the conversation (ms)').to.be.below(10_000);
    const text = await page.locator('.message.agent .text').first().textContent();
    expect(text).to.include('<img src=x onerror=');
    expect(await page.locator('.scroller img, .scroller script').count()).to.equal(0);
    expect(await page.locator('.scroller a[href^="javascript"]').count()).to.equal(0);
    expect(await page.locator('.scroller a[href="https://example.com/docs"]').count()).to.equal(1);
    expect(await page.locator('.scroller .unsafe-link').count()).to.equal(2);
    expect(await page.evaluate(() => (window as unknown as { __owned?: number }).__owned)).to.equal(undefined);
    // The long line is folded: its start is shown, the whole offered as a file.
    expect(await page.locator('.folded').textContent()).to.include('of 1.0 MB are shown');
    const download = page.waitForEvent('download');
    await page.click('a:has-text("Download the whole message")');
    const file = await (await download).path();
    expect(fs.readFileSync(file, 'utf8')).to.equal(hostile);
    await photograph(page, 'hostile');
    expect(suite.errors).to.deep.equal([]);
  });

  it('opens a 100,000-event conversation at its newest events and pages back without freezing', async () => {
    const conversationId = await longConversation(100_000);
    await signIn();
    const started = Date.now();
    await page.goto(`${suite.baseUrl}/#/conversations/${conversationId}`);
    await page.locator('.row[data-seq="100000"]').waitFor();
    const opened = Date.now() - started;
    expect(opened, 'opening at the newest events (ms)').to.be.below(10_000);
    expect(await page.locator('.row[data-seq]').count()).to.be.below(100);
    // Scroll up through five pages; the main thread never blocks for long.
    await page.evaluate(() => {
      (window as unknown as { longTasks: number[] }).longTasks = [];
      new PerformanceObserver((list) => list.getEntries().forEach((entry) => (window as unknown as { longTasks: number[] }).longTasks.push(entry.duration))).observe({ type: 'longtask' });
    });
    for (let i = 0; i < 12; i++) {
      await page.locator('.scroller').evaluate((element) => (element.scrollTop = 0));
      await page.waitForTimeout(150);
    }
    await page.locator('.row[data-seq="99400"]').waitFor({ state: 'attached', timeout: 10_000 }).catch(() => undefined);
    const oldest = await page.locator('.row[data-seq]').first().getAttribute('data-seq');
    expect(Number(oldest)).to.be.below(99_500);
    const longest = Math.max(0, ...(await page.evaluate(() => (window as unknown as { longTasks: number[] }).longTasks)));
    console.log(`      opened at event 100,000 in ${opened} ms; paged back to event ${oldest}; longest main-thread task ${Math.round(longest)} ms`);
    expect(longest, 'longest main-thread task while paging back (ms)').to.be.below(1000);
    expect(await page.locator('.row[data-seq]').count(), 'rows in the DOM').to.be.below(150);
    expect(suite.errors).to.deep.equal([]);
  });

  it('buys credits through the local checkout and shows the new balance', async () => {
    await signIn(user.accessToken, '#/account');
    await page.locator('#balance').waitFor();
    expect(await page.textContent('#balance')).to.equal('$0.00');
    await page.locator('#spend-title').waitFor();
    await expectAccessible(page);
    await photograph(page, 'account');
    await page.fill('#amount', '12');
    await Promise.all([page.waitForURL(/\/billing\/checkout\//), page.click('#buy-credits button')]);
    expect(await page.textContent('h1')).to.include('$12.00');
    await expectFitsPhone(page);
    await photograph(page, 'checkout');
    await Promise.all([page.waitForLoadState(), page.click('#confirm')]);
    await page.locator('.state[data-status="completed"]').waitFor();
    expect(await page.textContent('.checkout')).to.not.include('expires');
    await photograph(page, 'checkout-completed');
    await page.click('a:has-text("Back to your account")');
    await page.locator('#balance', { hasText: '$12.00' }).waitFor();
    expect(await page.textContent('#purchased')).to.equal('$12.00');
    expect(suite.errors).to.deep.equal([]);
  });

  it('shows an unknown checkout as an HTML 404 page', async () => {
    const response = await page.goto(`${suite.baseUrl}/billing/checkout/${randomUUID()}`);
    expect(response!.status()).to.equal(404);
    expect(response!.headers()['content-type']).to.match(/^text\/html/);
    expect(await page.textContent('h1')).to.equal('Checkout not found');
    await photograph(page, 'checkout-not-found');
  });

  it('redirects the old live page to the console viewer', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [message('first')]);
    const response = await fetch(`${suite.baseUrl}/live/conversations/${conversationId}`, { redirect: 'manual' });
    expect(response.status).to.equal(302);
    expect(response.headers.get('location')).to.equal(`/#/conversations/${conversationId}`);
  });

  it('shows super admins the administration page: users, super admins, verified models, audit log', async () => {
    const admin = await createUserFixture({ superAdmin: true });
    await signIn(admin.accessToken, '#/admin');
    await page.fill('#model-provider', 'anthropic');
    await page.fill('#model-name', 'claude-sonnet-4-5');
    await page.click('#add-model button');
    await page.locator('td code', { hasText: 'claude-sonnet-4-5' }).waitFor();
    expect(await page.textContent('#admins-title + .plain-list')).to.include(admin.email);
    await page.fill('#new-user-email', 'ada@example.com');
    await page.click('#create-user button');
    const row = page.locator('#users tbody tr', { hasText: 'ada@example.com' });
    await row.waitFor();
    // The first key, from the page: its secret shown once.
    await row.locator('button', { hasText: 'Issue first key' }).click();
    const secret = (await page.locator('#user-key-secret').textContent())!;
    rememberSecret(secret);
    expect((await fetch(`${suite.baseUrl}/api/v1/conversations`, { headers: { 'X-Access-Token': secret } })).status).to.equal(200);
    // Suspending asks first; Cancel leaves the user as they were.
    await row.locator('button', { hasText: 'Suspend' }).click();
    await row.locator('button', { hasText: 'Cancel' }).click();
    expect(await row.locator('.badge[data-status="active"]').count()).to.equal(1);
    await row.locator('button', { hasText: 'Suspend' }).click();
    await row.locator('button', { hasText: 'Confirm suspend' }).click();
    await page.locator('#users tbody tr', { hasText: 'ada@example.com' }).locator('.badge[data-status="suspended"]').waitFor();
    // Removing the last super admin fails (409): the error is shown in that row.
    const own = page.locator('#users tbody tr', { hasText: admin.email });
    await own.locator('button', { hasText: 'Remove super admin' }).click();
    await own.locator('button', { hasText: 'Confirm removal' }).click();
    await own.locator('.row-error').filter({ hasText: /.+/ }).waitFor();
    await page.fill('#audit-action', 'user.suspended');
    await page.click('section[aria-labelledby="audit-title"] form button');
    const entry = page.locator('#audit-log tbody tr', { hasText: 'User suspended' });
    await entry.waitFor();
    expect(await entry.textContent()).to.include(admin.email).and.include('ada@example.com');
    expect(await entry.locator('time').textContent()).to.not.include('\n');
    await expectAccessible(page);
    await photograph(page, 'admin');
    expect(suite.errors).to.deep.equal([]);
  });

  it('shows a banner on a conversation whose batches were refused, and the ledger on the admin page with a replay that asks first', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [message('Fix the failing test')]);
    await titled(conversationId, 'Fix the failing test');
    // A batch holding a kind this server does not know, as a newer agent-server sends it: refused (422), kept.
    const hostileKind = '<img src=x onerror=alert(1)>Event';
    const refused = await fetch(`${suite.baseUrl}${webhookPath(conversationId.replace(/-/g, ''))}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
      body: JSON.stringify([message('before'), { kind: hostileKind, id: randomUUID(), timestamp: '2026-11-27T08:00:00', source: 'environment' }]),
    });
    expect(refused.status).to.equal(422);
    await signIn(user.accessToken, `#/conversations/${conversationId}`);
    const banner = page.locator('#delivery-refusals');
    await banner.waitFor();
    expect(await banner.textContent()).to.include('The server refused 1 batch of this conversation’s events').and.include(hostileKind);
    await banner.locator('summary').click();
    expect(await page.locator('#delivery-refusals img').count()).to.equal(0);
    await expectAccessible(page);
    await photograph(page, 'conversation-refusals');

    const admin = await createUserFixture({ superAdmin: true });
    await page.evaluate(() => sessionStorage.clear());
    await signIn(admin.accessToken, '#/admin');
    const row = page.locator('#refused-deliveries tbody tr', { hasText: conversationId.replace(/-/g, '') });
    await row.waitFor();
    expect(await row.textContent()).to.include('422').and.include('union_tag_invalid');
    await page.locator('#refused').scrollIntoViewIfNeeded();
    await expectAccessible(page);
    await photograph(page, 'admin-refused-deliveries');
    await row.locator('button.replay').click();
    expect(await row.locator('button.replay').textContent()).to.include('Confirm replay');
    await row.locator('button.replay').click();
    // Still invalid under the strict contract: refused again, said so, and the row stays replayable.
    await page.locator('#refused .notice.error', { hasText: 'was refused again' }).waitFor();
    expect(suite.errors).to.deep.equal([]);
  });

  it('drops the banner by itself once the agent-server\'s own retry is accepted (the policy switched to accept-unknown), and the admin page says resolved', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [message('Upgrade the SDK')]);
    await titled(conversationId, 'Upgrade the SDK');
    // The agent-server's client: the refused batch goes back to the front of its queue and is retried on each flush.
    const upgraded = await createTestApp({ webhookEventCompatibility: 'accept-unknown' });
    let accepting = false;
    const subscriber = new WebhookSubscriber(conversationId, async (hex, events) => {
      if (accepting) return (await postEvents(upgraded, user.sessionApiKey, hex, events)).status;
      const response = await fetch(`${suite.baseUrl}${webhookPath(hex)}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Session-API-Key': user.sessionApiKey },
        body: JSON.stringify(events),
      });
      await response.arrayBuffer(); // read, so that the connection is free for the next attempt
      return response.status;
    });
    await subscriber.publish(message('while the server was strict'));
    await subscriber.publish({ kind: 'FutureAnalysisEvent', id: randomUUID(), timestamp: '2026-11-27T08:00:00', source: 'environment', risk: 'LOW' });
    await subscriber.flush();
    expect(subscriber.statuses).to.deep.equal([422, 422, 422, 422]);
    await signIn(user.accessToken, `#/conversations/${conversationId}`);
    await page.locator('#delivery-refusals').waitFor();

    accepting = true;
    await subscriber.flush();
    expect(subscriber.statuses.at(-1)).to.equal(200);
    await page.reload();
    await page.locator('.card.unrecognized', { hasText: 'FutureAnalysisEvent' }).waitFor();
    expect(await page.locator('#delivery-refusals').count()).to.equal(0);
    await expectAccessible(page);
    await photograph(page, 'conversation-refusal-resolved');

    const admin = await createUserFixture({ superAdmin: true });
    await page.evaluate(() => sessionStorage.clear());
    await signIn(admin.accessToken, '#/admin');
    const row = page.locator('#refused-deliveries tbody tr', { hasText: conversationId.replace(/-/g, '') });
    await row.waitFor();
    expect(await row.textContent()).to.include('Resolved');
    expect(await row.locator('button.replay').count()).to.equal(0);
    await page.locator('#refused').scrollIntoViewIfNeeded();
    await photograph(page, 'admin-refused-resolved');
    expect(suite.errors).to.deep.equal([]);
  });

  it('creates a key, shows its secret once with a copy button, and revokes it', async () => {
    await signIn(user.accessToken, '#/account');
    await page.fill('#key-name', 'laptop CLI');
    await page.click('#create-key button[type=submit]');
    const secret = (await page.locator('#new-secret').textContent())!;
    rememberSecret(secret);
    expect(await page.locator('.secret-box button', { hasText: 'Copy' }).count()).to.equal(1);
    const works = await fetch(`${suite.baseUrl}/api/v1/conversations`, { headers: { 'X-Access-Token': secret } });
    expect(works.status).to.equal(200);
    await expectAccessible(page);
    await photograph(page, 'keys');
    const row = page.locator('#keys tbody tr', { hasText: 'laptop CLI' });
    await row.locator('button').click();
    await row.locator('button', { hasText: 'Confirm revoke' }).click();
    await row.waitFor({ state: 'detached' });
    expect(await page.locator('#new-secret').count(), 'the secret is not shown again').to.equal(0);
    const refused = await fetch(`${suite.baseUrl}/api/v1/conversations`, { headers: { 'X-Access-Token': secret } });
    expect(refused.status).to.equal(401);
    expect(suite.errors).to.deep.equal([]);
  });

  it('adds an outbound webhook endpoint (its signing secret shown once), sends a test, deletes it', async () => {
    await signIn(user.accessToken, '#/account');
    await page.fill('#endpoint-url', 'https://hooks.example.com/agents');
    await page.fill('#endpoint-description', 'team chat');
    await page.click('#create-endpoint button[type=submit]');
    const secret = (await page.locator('#endpoint-secret').textContent())!;
    rememberSecret(secret);
    const row = page.locator('#endpoints tbody tr', { hasText: 'https://hooks.example.com/agents' });
    expect(await row.textContent()).to.include('team chat');
    await row.locator('button', { hasText: 'Send test' }).click();
    await page.locator('.notice', { hasText: 'Test message queued' }).waitFor();
    await expectAccessible(page);
    await photograph(page, 'account-endpoints');
    await page.locator('#endpoints tbody tr', { hasText: 'https://hooks.example.com/agents' }).locator('button', { hasText: 'Delete' }).click();
    await page.locator('.notice', { hasText: 'Endpoint deleted' }).waitFor();
    expect(await page.locator('#endpoints').count()).to.equal(0);
    expect(suite.errors).to.deep.equal([]);
  });

  it('shows a webhook endpoint\'s health, its message log, a test send and a recovery\'s progress', async () => {
    const headers = { 'Content-Type': 'application/json', 'X-Access-Token': user.accessToken };
    const created = await (await fetch(`${suite.baseUrl}/api/v1/webhook-endpoints`, { method: 'POST', headers, body: JSON.stringify({ url: 'https://hooks.example.com/ops', description: 'on-call' }) })).json();
    rememberSecret(created.secret);
    const sent: { id: string }[] = [];
    for (let i = 0; i < 2; i++) sent.push(await (await fetch(`${suite.baseUrl}/api/v1/webhook-endpoints/${created.id}/test`, { method: 'POST', headers })).json());
    // No worker runs here: the attempts are written as a receiver's outage and recovery would leave them.
    const sql = testDatabase().orm.em.getConnection();
    await sql.execute(
      `insert into webhook_attempts (message_id, endpoint_id, attempt, started_at, duration_ms, status_code, error)
       values (?, ?, 1, now() - interval '2 minutes', 40, 503, 'The receiver answered 503'), (?, ?, 1, now() - interval '1 minute', 25, 200, null)`,
      [sent[0]!.id, created.id, sent[1]!.id, created.id],
    );
    await sql.execute(`update webhook_deliveries set state = 'failed', attempts = 1, last_status_code = 503, last_error = 'The receiver answered 503' where message_id = ?`, [sent[0]!.id]);
    await sql.execute(`update webhook_deliveries set state = 'succeeded', attempts = 1, last_status_code = 200 where message_id = ?`, [sent[1]!.id]);

    await signIn(user.accessToken, '#/account');
    await page.locator('#endpoints a', { hasText: 'https://hooks.example.com/ops' }).click();
    await page.locator('#endpoint-stats').waitFor();
    const facts = await page.locator('#endpoint-stats').innerText();
    expect(facts).to.match(/attempts\s+2\n/i).and.match(/succeeded\s+1\n/i).and.match(/failed 5xx\s+1\n/i).and.match(/p50\s+33 ms/i);
    expect(await page.locator('#endpoint-messages tbody tr').count()).to.equal(2);
    expect(await page.locator('#endpoint-messages').innerText()).to.include('The receiver answered 503');
    await page.click('#send-test');
    await page.locator('.notice', { hasText: 'Test message queued' }).waitFor();
    await page.locator('#endpoint-messages tbody tr').nth(2).waitFor();
    await page.click('#recover button[type=submit]');
    await page.locator('#recover-progress', { hasText: 'Recovery running: 0 of 1 sent' }).waitFor();
    await expectAccessible(page);
    await expectFitsPhone(page);
    await photograph(page, 'webhook-endpoint');
    expect(suite.errors).to.deep.equal([]);
  });

  it('searches conversations by title and status; the filters stay in the URL', async () => {
    const billing = randomUUID();
    const docs = randomUUID();
    await post(billing, [message('fix it')]);
    await titled(billing, 'Fix the billing export');
    await post(docs, [message('write')]);
    await titled(docs, 'Write the docs', 'finished');
    await signIn();
    await page.locator('#conversations tbody tr').nth(1).waitFor();
    await page.fill('#search-q', 'billing');
    await page.click('#conversation-search button[type=submit]');
    await page.locator('#conversation-count', { hasText: '1 conversation' }).waitFor();
    expect(await page.locator('#conversations tbody tr').allTextContents()).to.have.length(1);
    expect(await page.textContent('#conversations tbody')).to.include('Fix the billing export');
    expect(page.url()).to.include('q=billing');
    await page.fill('#search-q', '');
    await page.selectOption('#search-status', 'finished');
    await page.locator('#conversations tbody tr', { hasText: 'Write the docs' }).waitFor();
    await page.locator('#conversation-count', { hasText: '1 conversation' }).waitFor();
    expect(await page.locator('#conversations tbody tr').count()).to.equal(1);
    await expectAccessible(page);
    await photograph(page, 'search');
    await page.reload();
    await page.locator('#conversations tbody tr', { hasText: 'Write the docs' }).waitFor();
    expect(await page.inputValue('#search-status')).to.equal('finished');
    expect(suite.errors).to.deep.equal([]);
  });

  it('downloads a conversation as NDJSON and renames it', async () => {
    const conversationId = randomUUID();
    await post(conversationId, [message('export me')]);
    await signIn(user.accessToken, `#/conversations/${conversationId}`);
    await page.locator('.message.user .text', { hasText: 'export me' }).waitFor();
    const download = page.waitForEvent('download');
    await page.click('#export');
    const lines = fs.readFileSync((await (await download).path())!, 'utf8').trim().split('\n');
    expect(JSON.parse(lines[0]!).conversation.id).to.equal(conversationId);
    expect(JSON.parse(lines[1]!).event.llm_message.content[0].text).to.equal('export me');
    await page.click('#rename');
    await page.fill('#new-title', 'Exported once');
    await page.click('form.rename button[type=submit]');
    await page.locator('#conversation-title', { hasText: 'Exported once' }).waitFor();
    expect(suite.errors).to.deep.equal([]);
  });
});
