import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { createOpenApiBackend } from '../../src/api/openapi.ts';
import { EventCompatibility } from '../../src/api/event-compatibility.ts';

const sdkEvents = JSON.parse(readFileSync(new URL('../fixtures/agent-server/events.json', import.meta.url), 'utf8')) as Record<string, unknown>[];
const sdkEvent = (kind: string) => structuredClone(sdkEvents.find((e) => e.kind === kind)!);

describe('EventCompatibility (the accept-unknown policy, per event)', () => {
  let compatibility: EventCompatibility;
  before(async () => {
    const api = await createOpenApiBackend();
    compatibility = new EventCompatibility(api.definition.components!.schemas as Record<string, unknown>);
  });

  it('marks nothing in events the contract knows', () => {
    expect(compatibility.examine(sdkEvents)).to.deep.equal(sdkEvents.map(() => null));
  });

  it('marks an unknown kind as a whole', () => {
    expect(compatibility.examine([{ kind: 'SomethingNewEvent', anything: [1, { deep: true }] }])).to.deep.equal([{ kind: true, properties: [] }]);
  });

  it('names unknown properties inside unions by the branch the data takes, not the ones it does not', () => {
    const message = sdkEvent('MessageEvent');
    const llm = message.llm_message as { thinking_blocks: Record<string, unknown>[] };
    // A thinking block (one of ThinkingBlock | RedactedThinkingBlock) with a new property: only that property is unknown.
    llm.thinking_blocks = [{ type: 'thinking', thinking: 'step', signature: null, cache_control: { type: 'ephemeral' } }];
    const action = sdkEvent('ActionEvent');
    (action.tool_call as Record<string, unknown>)['new key'] = 1;
    (action.responses_reasoning_item as Record<string, unknown>).tokens = 3;
    expect(compatibility.examine([message, action])).to.deep.equal([
      { kind: false, properties: ['$.llm_message.thinking_blocks[0].cache_control'] },
      { kind: false, properties: ['$.responses_reasoning_item.tokens', '$.tool_call["new key"]'] },
    ]);
  });

  it('leaves open payloads open: action and observation fields are never unknown', () => {
    const action = sdkEvent('ActionEvent');
    (action.action as Record<string, unknown>).brand_new_argument = 'x';
    expect(compatibility.examine([action])).to.deep.equal([null]);
  });

  it('refuses the batch (undefined) when any event breaks another rule, or cannot be stored', () => {
    const wrongType = { ...sdkEvent('PauseEvent'), source: 42, extra: 1 };
    expect(compatibility.examine([{ kind: 'New' }, wrongType])).to.equal(undefined);
    expect(compatibility.examine([{ kind: 'x'.repeat(65) }])).to.equal(undefined);
    expect(compatibility.examine([{ kind: 'New', id: { not: 'a string' } }])).to.equal(undefined);
    expect(compatibility.examine(['not an event'])).to.equal(undefined);
  });

  it('bounds a marker: at most 100 paths, each at most 1,000 characters and an ellipsis', () => {
    const event: Record<string, unknown> = sdkEvent('PauseEvent');
    for (let i = 0; i < 150; i++) event[`p${String(i).padStart(3, '0')}`] = i;
    event[`q${'x'.repeat(2000)}`] = 1;
    const [marker] = compatibility.examine([event])!;
    expect(marker!.properties).to.have.length(100);
    const long = compatibility.examine([{ ...sdkEvent('PauseEvent'), [`q${'x'.repeat(2000)}`]: 1 }])![0]!.properties[0]!;
    expect(long).to.have.length(1001);
    expect(long.endsWith('…')).to.equal(true);
  });
});
