import type { EntityManager } from '@mikro-orm/postgresql';
import type { SearchConfig } from '../config.ts';
import type { Logger } from '../logger.ts';
import { isDatabaseUnavailable } from '../db/errors.ts';
import { OutageLog, type OutageObserver } from '../observability/outage-log.ts';
import { busyRestMs, inFlight, type Pressure } from '../outbound/ingest-pressure.ts';
import * as queries from './queries.ts';
import type { IndexRow } from './copy-rows.ts';
import { eventText, indexLexemes } from './text.ts';

/** Arbitrary constant: the advisory lock of the one indexing transaction at a time (across instances). */
export const SEARCH_INDEXER_LOCK_ID = 7_240_135;

/** Conversations taken per transaction at most, and events of one conversation. */
const CONVERSATIONS_PER_CYCLE = 200;
const EVENTS_PER_CONVERSATION = 500;
/** Events of a cycle while ingestion is busy: a short unit, followed by a rest 19 times as long. */
const BUSY_CYCLE_EVENTS = 200;
/** Events extracted between two turns of the event loop: requests are answered while a cycle works. */
const EVENTS_PER_TURN = 50;

export interface IndexCycle {
  /** Another instance held the lock: this one did nothing. */
  skipped: boolean;
  conversations: number;
  events: number;
}

/**
 * Fills `event_search` from what the webhook stored, behind it: the webhook only marks a conversation
 * (`search_from`); each cycle reads marked conversations' events after their last index row, extracts
 * their text and, in one transaction, inserts the index rows and moves the marks it can. The index rows
 * are their own watermark, so a crash loses nothing and indexes nothing twice; a transaction-level
 * advisory lock lets one instance index at a time.
 */
export class SearchIndexer {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = true;
  /** Where the next cycle starts in id order, so a busy conversation cannot starve the others. */
  private resumeAfter: string | null = null;

  /** A database outage is one line when it starts and one when it ends, not one per failed cycle. */
  private readonly outage: OutageLog;

  constructor(
    private readonly em: EntityManager,
    private readonly config: Pick<SearchConfig, 'intervalMs' | 'batchEvents'>,
    private readonly log: Logger,
    outageObserver?: OutageObserver,
    /** Indexing yields to ingestion as delivery does: the webhook's answers come first. */
    private readonly pressure?: Pressure,
  ) {
    this.outage = new OutageLog('search indexer', 'cycles failed', log, outageObserver);
  }

  /** Indexes until `stop()`: at once while there is work, every `intervalMs` when there was none. */
  start(): void {
    this.stopped = false;
    const schedule = (delay: number) => {
      this.timer = setTimeout(() => {
        const busy = this.pressure?.busy() ?? false;
        let started = performance.now();
        this.running = this.countedCycle(busy ? Math.min(BUSY_CYCLE_EVENTS, this.config.batchEvents) : this.config.batchEvents, () => (started = performance.now()))
          .then((cycle) => {
            this.outage.succeeded();
            return cycle.events > 0 && !cycle.skipped;
          })
          .catch((error: unknown) => {
            if (isDatabaseUnavailable(error)) this.outage.failed(error);
            else this.log.error({ err: error }, 'search indexing failed');
            return false;
          })
          .then((worked) => {
            this.running = undefined;
            const rest = busyRestMs(this.pressure, performance.now() - started);
            if (!this.stopped) schedule(worked ? rest : Math.max(rest, this.config.intervalMs));
          });
      }, delay);
    };
    schedule(0);
  }

  /** A cycle counted as background work in flight, so the webhook's own figures are read without it; `began` once it may run. */
  private countedCycle(batchEvents: number, began: () => void): Promise<IndexCycle> {
    return inFlight(this.pressure, () => {
      began();
      return this.indexOnce(batchEvents);
    });
  }

  /** Stops scheduling and waits for the cycle in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.outage.close();
    await this.running;
  }

  /** One transaction: up to `batchEvents` events indexed and their marks moved, unless another instance is indexing. */
  async indexOnce(batchEvents = this.config.batchEvents): Promise<IndexCycle> {
    return this.em.getConnection().getKnex().transaction(async (trx) => {
      if (!(await queries.tryLockIndexer(trx, SEARCH_INDEXER_LOCK_ID))) return { skipped: true, conversations: 0, events: 0 };
      const perConversation = Math.min(EVENTS_PER_CONVERSATION, batchEvents);
      const ranges = await queries.pendingRanges(trx, this.resumeAfter, CONVERSATIONS_PER_CYCLE, perConversation);
      const taken: queries.PendingRange[] = [];
      // Marks to move: past each range indexed now, and past the index rows for a mark left behind them.
      const marks: queries.IndexedThrough[] = [];
      let budget = batchEvents;
      let last: string | null = null;
      for (const range of ranges) {
        if (range.to_seq < range.from_seq) marks.push({ id: range.id, through: range.from_seq - 1 });
        else if (budget <= 0) break;
        else {
          const to = Math.min(range.to_seq, range.from_seq + budget - 1);
          taken.push({ ...range, to_seq: to });
          marks.push({ id: range.id, through: to });
          budget -= to - range.from_seq + 1;
        }
        last = range.id;
      }
      if (marks.length === 0) {
        this.resumeAfter = null;
        return { skipped: false, conversations: 0, events: 0 };
      }
      const events = taken.length === 0 ? [] : await queries.pendingEvents(trx, taken);
      const owners = new Map(taken.map((range) => [range.id, range.owner_id]));
      const rows: IndexRow[] = [];
      for (const [i, event] of events.entries()) {
        if (i > 0 && i % EVENTS_PER_TURN === 0) await new Promise((resolve) => setImmediate(resolve));
        rows.push({
          conversationId: event.conversation_id,
          seq: event.seq,
          ownerId: owners.get(event.conversation_id)!,
          kind: event.kind,
          source: event.source,
          eventMicros: event.event_micros,
          lexemes: indexLexemes(textOfPayload(event.payload)),
        });
      }
      // Each range starts after its conversation's last index row, and one instance indexes at a time: none is there yet.
      if (rows.length > 0) await queries.copyIndexRows(trx, rows);
      await queries.moveMarks(trx, marks);
      this.resumeAfter = last;
      return { skipped: false, conversations: marks.length, events: events.length };
    });
  }

  /** Indexes until nothing is owed (tests, benchmarks); waits for another instance's cycle rather than skipping. */
  async catchUp(): Promise<number> {
    let events = 0;
    for (;;) {
      const cycle = await this.indexOnce();
      events += cycle.events;
      if (cycle.conversations === 0 && !cycle.skipped) return events;
      // Another instance's cycle, or only marks a webhook transaction held: again in a moment.
      if (cycle.events === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** The searchable text of a stored event's JSON (any JSON the webhook stored: an unparsable one gives none). */
export function textOfPayload(payload: string): string {
  try {
    const event = JSON.parse(payload) as unknown;
    return event && typeof event === 'object' && !Array.isArray(event) ? eventText(event as Record<string, unknown>) : '';
  } catch {
    return '';
  }
}
