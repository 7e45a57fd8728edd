import { expect } from 'chai';
import { MAX_DETAIL_CHARS, MAX_KEPT_EVENT_IDS, refusalOf, refusedEventIds } from '../../src/refusals/refusal.ts';

describe('refusalOf (what the refusal ledger, the log and the metrics say about a refused batch)', () => {
  it('names the first 422 error type as the reason and each problem as loc: msg, five at most', () => {
    const detail = Array.from({ length: 7 }, (_, i) => ({ loc: ['body', i, 'kind'], msg: `problem ${i}`, type: i === 0 ? 'union_tag_invalid' : 'missing', input: 'x' }));
    const refusal = refusalOf(422, detail);
    expect(refusal).to.deep.equal({
      status: 422,
      reason: 'union_tag_invalid',
      detail: 'body.0.kind: problem 0; body.1.kind: problem 1; body.2.kind: problem 2; body.3.kind: problem 3; body.4.kind: problem 4 (and 2 more)',
    });
  });

  it('bounds the detail to 1000 characters, never the input', () => {
    const refusal = refusalOf(422, [{ loc: ['body', 0], msg: 'm'.repeat(5000), type: 'value_error', input: 'SECRET-PAYLOAD' }]);
    expect(refusal.detail).to.have.length(MAX_DETAIL_CHARS).and.match(/…$/);
    expect(refusal.detail).not.to.include('SECRET-PAYLOAD');
  });

  it('keeps a 413 message and its reason', () => {
    expect(refusalOf(413, 'Request body exceeds the limit of 10 bytes')).to.deep.equal({ status: 413, reason: 'body_too_large', detail: 'Request body exceeds the limit of 10 bytes' });
    expect(refusalOf(413, 'too many', 'batch_too_large').reason).to.equal('batch_too_large');
  });
});

describe('refusedEventIds (what tells when a refusal is resolved)', () => {
  const body = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

  it('keeps the ids of the events a body would store, distinct, in order, stream deltas aside', () => {
    const events = [{ kind: 'MessageEvent', id: 'b' }, { kind: 'StreamingDeltaEvent' }, { kind: 'FutureEvent', id: 'a' }, { kind: 'MessageEvent', id: 'b' }];
    expect(refusedEventIds(body(events))).to.deep.equal(['b', 'a']);
  });

  it('keeps the first 1000 of a longer batch', () => {
    const ids = refusedEventIds(body(Array.from({ length: 1500 }, (_, i) => ({ kind: 'MessageEvent', id: `e${i}` }))));
    expect(ids).to.have.length(MAX_KEPT_EVENT_IDS);
    expect(ids!.at(-1)).to.equal('e999');
  });

  it('keeps none of a body that is not a JSON array of events each with a string id, or stores nothing', () => {
    for (const value of ['[{"kind": "MessageEvent"', { kind: 'MessageEvent', id: 'x' }, [{ kind: 'MessageEvent' }], [{ kind: 'MessageEvent', id: 7 }], [null], [], [{ kind: 'StreamingDeltaEvent' }]]) {
      expect(refusedEventIds(body(value)), JSON.stringify(value)).to.equal(null);
    }
    expect(refusedEventIds(Buffer.from([0x5b, 0xff, 0x5d]))).to.equal(null);
    expect(refusedEventIds(undefined)).to.equal(null);
  });
});
