import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createUserFixture, type UserFixture } from '../helpers/fixtures.ts';
import { parsePrometheusText, sumSamples, type MetricFamily } from '../helpers/prometheus.ts';
import { minimalEvent } from '../fixtures/events.ts';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { postEvents } from '../helpers/webhook.ts';

type Families = Map<string, MetricFamily>;

describe('GET /metrics', () => {
  let client: TestApp;
  let owner: UserFixture;
  before(async () => {
    client = await createTestApp({ metricsToken: undefined });
  });
  beforeEach(async () => {
    owner = await createUserFixture();
  });

  const scrape = async (): Promise<Families> => {
    const response = await client.request.get('/metrics').expect(200);
    expect(response.headers['content-type']).to.match(/^text\/plain; version=0\.0\.4/);
    return parsePrometheusText(response.text);
  };
  const webhook = (conversationId: string, events: unknown) => postEvents(client, owner.sessionApiKey, conversationId, events);

  it('answers the Prometheus text format with request, webhook, pool and process metrics', async () => {
    await client.request.get('/healthz').expect(200);
    const families = await scrape();
    for (const [name, type] of [
      ['http_requests_total', 'counter'],
      ['http_request_duration_seconds', 'histogram'],
      ['http_validation_errors_total', 'counter'],
      ['webhook_batches_total', 'counter'],
      ['webhook_events_received_total', 'counter'],
      ['webhook_events_stored_total', 'counter'],
      ['webhook_events_deduplicated_total', 'counter'],
      ['db_pool_connections_in_use', 'gauge'],
      ['db_pool_connections_idle', 'gauge'],
      ['db_pool_acquires_pending', 'gauge'],
      ['process_cpu_seconds_total', 'counter'],
      ['process_resident_memory_bytes', 'gauge'],
      ['nodejs_eventloop_lag_seconds', 'gauge'],
    ] as const) {
      expect(families.get(name)?.type, name).to.equal(type);
    }
    expect(sumSamples(families, 'http_requests_total', { operation: 'getHealth', method: 'GET', status: '200' })).to.be.at.least(1);
    expect(sumSamples(families, 'process_resident_memory_bytes')).to.be.greaterThan(10_000_000);
    // The test database's pool has served queries, so it holds at least one open connection.
    const open = sumSamples(families, 'db_pool_connections_in_use') + sumSamples(families, 'db_pool_connections_idle');
    expect(open).to.be.at.least(1);
  });

  it('counts requests, latencies, ingested, stored and deduplicated events and 422 problems as traffic arrives', async () => {
    const before = await scrape();
    const conversationId = randomUUID();
    const batch = [
      minimalEvent('MessageEvent', { id: randomUUID() }),
      minimalEvent('ActionEvent', { id: randomUUID() }),
      minimalEvent('ObservationEvent', { id: randomUUID() }),
      minimalEvent('StreamingDeltaEvent'),
    ];
    await webhook(conversationId, batch).expect(200);
    // Redelivery of the same batch: acknowledged, nothing stored again.
    await webhook(conversationId, batch).expect(200);
    // Two problems: an unknown field on one event, a missing one on another.
    const missing = minimalEvent('MessageEvent', { id: randomUUID() });
    delete missing.llm_message;
    await webhook(conversationId, [{ ...minimalEvent('PauseEvent'), surprise: 1 }, missing]).expect(422);
    await client.request.get('/no/such/route').expect(404);
    const after = await scrape();

    const delta = (name: string, labels: Record<string, string> = {}) =>
      sumSamples(after, name, labels) - sumSamples(before, name, labels);
    expect(delta('http_requests_total', { operation: 'ingestEvents', method: 'POST', status: '200' })).to.equal(2);
    expect(delta('http_requests_total', { operation: 'ingestEvents', method: 'POST', status: '422' })).to.equal(1);
    expect(delta('http_requests_total', { operation: 'unmatched', method: 'GET', status: '404' })).to.equal(1);
    expect(delta('http_request_duration_seconds_count', { operation: 'ingestEvents' })).to.equal(3);
    expect(delta('http_request_duration_seconds_bucket', { operation: 'ingestEvents', le: '+Inf' })).to.equal(3);
    expect(delta('http_request_duration_seconds_sum', { operation: 'ingestEvents' })).to.be.greaterThan(0);
    expect(delta('webhook_events_received_total', { kind: 'MessageEvent' })).to.equal(2);
    expect(delta('webhook_events_received_total', { kind: 'StreamingDeltaEvent' })).to.equal(2);
    expect(delta('webhook_events_received_total')).to.equal(8);
    expect(delta('webhook_events_stored_total')).to.equal(3);
    expect(delta('webhook_events_deduplicated_total')).to.equal(3);
    expect(delta('webhook_batches_total', { result: 'stored' })).to.equal(1);
    expect(delta('webhook_batches_total', { result: 'deduplicated' })).to.equal(1);
    expect(delta('http_validation_errors_total', { operation: 'ingestEvents', type: 'missing' })).to.equal(1);
    expect(delta('http_validation_errors_total', { operation: 'ingestEvents', type: 'extra_forbidden' })).to.equal(1);
    // The stored events are really there: the metric agrees with the database.
    const events = await client.request
      .get(`/api/v1/conversations/${conversationId}/events`)
      .set('X-Access-Token', owner.accessToken)
      .expect(200);
    expect(events.body.items).to.have.length(3);
  });

  it('never labels a series with a credential or a request path', async () => {
    await webhook(randomUUID(), [minimalEvent('PauseEvent')]).expect(200);
    const text = (await client.request.get('/metrics').expect(200)).text;
    expect(text).not.to.include(owner.sessionApiKey);
    expect(text).not.to.include('/api/v1/webhooks');
  });
});

describe('GET /metrics with METRICS_TOKEN configured', () => {
  const token = `metrics-${randomUUID()}`;
  let client: TestApp;
  before(async () => {
    client = await createTestApp({ metricsToken: token });
  });

  it('returns 401 with a Bearer challenge without the token or with another one', async () => {
    const missing = await client.request.get('/metrics').expect(401);
    expect(missing.headers['www-authenticate']).to.match(/^Bearer/);
    expect(missing.body).to.have.property('detail').that.is.a('string');
    await client.request.get('/metrics').set('Authorization', `Bearer ${token}x`).expect(401);
    await client.request.get('/metrics').set('Authorization', token).expect(401);
  });

  it('answers the metrics with the token, and never logs it', async () => {
    const response = await client.request.get('/metrics').set('Authorization', `Bearer ${token}`).expect(200);
    expect(parsePrometheusText(response.text).has('http_requests_total')).to.equal(true);
    expect(client.logs.join('')).not.to.include(token);
  });
});

describe('METRICS_TOKEN configuration', () => {
  it('is optional, and refuses a short token or one with spaces', () => {
    expect(loadConfig({}).metricsToken).to.equal(undefined);
    expect(loadConfig({ METRICS_TOKEN: 'a-long-enough-token' }).metricsToken).to.equal('a-long-enough-token');
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).to.throw(ConfigError, /METRICS_TOKEN/);
    expect(() => loadConfig({ METRICS_TOKEN: 'a long enough token' })).to.throw(ConfigError, /METRICS_TOKEN/);
  });
});

describe('the Prometheus text parser used by these tests', () => {
  it('refuses what a Prometheus server refuses', () => {
    expect(() => parsePrometheusText('x 1\n')).to.throw(/undeclared/);
    expect(() => parsePrometheusText('# TYPE x counter\nx{a="1} 1\n')).to.throw();
    expect(() => parsePrometheusText('# TYPE x counter\nx one\n')).to.throw(/value/);
    expect(() => parsePrometheusText('# TYPE x counter\nx 1')).to.throw(/newline/);
    expect(() => parsePrometheusText('# TYPE x counter\nx 1\nx 2\n')).to.throw(/repeated/);
    expect(() =>
      parsePrometheusText('# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'),
    ).to.throw(/cumulative/);
    const families = parsePrometheusText('# HELP x A "help" line.\n# TYPE x counter\nx{a="q\\"\\n\\\\"} 1.5e3\n');
    expect(families.get('x')?.samples[0]).to.deep.equal({ name: 'x', labels: { a: 'q"\n\\' }, value: 1500 });
  });

  it('reads NaN and the infinities in any letter case, as Prometheus does (prom-client writes "Nan")', () => {
    const families = parsePrometheusText('# TYPE g gauge\ng{a="1"} Nan\ng{a="2"} +inf\ng{a="3"} -Inf\n');
    expect(families.get('g')?.samples.map((sample) => sample.value)).to.deep.equal([NaN, Infinity, -Infinity]);
    expect(() => parsePrometheusText('# TYPE g gauge\ng NaNa\n')).to.throw(/value/);
  });
});
