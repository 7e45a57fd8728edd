import { Outline } from './outline.ts';
import { renderRow } from './render.ts';
import type { ConversationRows, GapRow, PendingRow, Row, StoredEvent } from './rows.ts';
import { VirtualList } from './virtual-list.ts';

/** Events read per page. */
export const PAGE = 100;
/** Pages read at once when going back to a linked event far from the newest ones. */
const SEEK_PAGE = 1000;

/** The `limit` events before `beforeSeq` (the newest when undefined), in sequence order; undefined when they could not be read. */
export type PageFetcher = (beforeSeq: number | undefined, limit: number) => Promise<StoredEvent[] | undefined>;

/**
 * A conversation's events as the viewer shows them, for the console's viewer and the shared page
 * alike: the virtual list and its outline, older pages read from `fetchPage` as the reader scrolls
 * up or follows a link, j / k between steps, and (for a live tail) events and the agent's reply
 * as it is written appended at the end.
 */
export class ViewerFeed {
  readonly list: VirtualList<Row>;
  readonly outline: Outline;
  private readonly older: GapRow = { key: 'older', type: 'older', state: 'more' };
  private pending: PendingRow | undefined;
  private loadingOlder: Promise<boolean> | undefined;
  private currentKey: string | undefined;
  private stopped = false;

  /** `onChange`: after events were added (facts computed from the events on screen). */
  constructor(
    readonly rows: ConversationRows,
    private readonly fetchPage: PageFetcher,
    private readonly onChange: () => void = () => {},
  ) {
    this.list = new VirtualList<Row>((row) => renderRow(row, rows, () => void this.loadOlder()), () => void this.loadOlder(), 'Conversation events');
    this.outline = new Outline(rows, (seq) => void this.showEvent(seq));
    document.addEventListener('keydown', this.onKey);
  }

  /** Shows the newest page (`events`, in sequence order) at the bottom of the list. */
  open(events: StoredEvent[]): void {
    this.older.state = olderState(events, PAGE);
    this.list.append([this.older]);
    this.addEvents(events, 'end');
    this.list.scrollToBottom();
  }

  /** Live tail: a newly stored event, false when it was already shown; the agent's message ends its pending reply. */
  addLive(stored: StoredEvent): boolean {
    if (stored.seq <= this.rows.lastSeq && this.rows.lastSeq > 0) return false;
    if (stored.event.kind === 'MessageEvent' && this.pending && stored.event.source === 'agent') {
      this.list.remove('pending');
      this.pending = undefined;
    }
    this.addEvents([stored], 'end');
    return true;
  }

  /** Live tail: a piece of the reply the agent is writing, shown below the last event until its message arrives. */
  addDelta(delta: { content?: string | null; reasoning_content?: string | null }): void {
    if (!this.pending) {
      this.pending = { key: 'pending', type: 'pending', content: '', reasoning: '' };
      this.list.append([this.pending]);
    }
    this.pending.content += delta.content ?? '';
    this.pending.reasoning += delta.reasoning_content ?? '';
    this.list.refresh('pending');
  }

  /**
   * Scrolls to event `seq` (loading older pages up to it first), marks it and gives it the focus;
   * false when it is not among the events shown (a kind the page hides, or the feed stopped).
   */
  async showEvent(seq: number): Promise<boolean> {
    const rows = this.rows;
    while (!rows.keyOf(seq) && rows.firstSeq > seq && !this.stopped && (await this.loadOlder(Math.min(SEEK_PAGE, rows.firstSeq - seq + PAGE))));
    const key = rows.keyOf(seq);
    if (!key || this.stopped) return false;
    this.focusRow(key);
    return true;
  }

  /** Stops loading and listening; the page is going away. */
  destroy(): void {
    this.stopped = true;
    document.removeEventListener('keydown', this.onKey);
    this.list.destroy();
  }

  private addEvents(events: StoredEvent[], where: 'start' | 'end'): void {
    const updated = new Set<string>();
    const orphans = new Set<string>();
    const added = this.rows.add(events, updated, orphans);
    for (const key of orphans) this.list.remove(key);
    if (where === 'start') this.list.prepend(added);
    else {
      // The pending reply stays below the last event.
      if (this.pending) this.list.remove('pending');
      this.list.append(added);
      if (this.pending) this.list.append([this.pending]);
    }
    for (const key of updated) this.list.refresh(key);
    this.outline.update();
    this.onChange();
  }

  /** Loads the page before the oldest event shown; resolves to whether it added any. */
  private loadOlder(limit = PAGE): Promise<boolean> {
    const { older, list, rows } = this;
    if (older.state === 'start' || rows.firstSeq <= 1) return Promise.resolve(false);
    this.loadingOlder ??= (async () => {
      older.state = 'loading';
      list.refresh('older');
      const events = await this.fetchPage(rows.firstSeq, limit);
      if (this.stopped) return false;
      if (!events?.length) {
        older.state = events ? 'start' : 'error';
        list.refresh('older');
        return false;
      }
      list.remove('older');
      this.addEvents(events, 'start');
      older.state = olderState(events, limit);
      list.prepend([older]);
      return true;
    })().finally(() => (this.loadingOlder = undefined));
    return this.loadingOlder;
  }

  private focusRow(key: string): void {
    const element = this.list.scrollToKey(key);
    this.currentKey = key;
    this.list.element.querySelector('.row.current')?.classList.remove('current');
    element?.classList.add('current');
    element?.focus({ preventScroll: true });
  }

  /** j / k: the next or previous step. */
  private readonly onKey = (event: KeyboardEvent): void => {
    if (event.altKey || event.ctrlKey || event.metaKey || (event.key !== 'j' && event.key !== 'k')) return;
    const target = event.target as HTMLElement | null;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    const keys = this.list.keys().filter((key) => key.startsWith('e'));
    const { currentKey } = this;
    const from = currentKey && keys.includes(currentKey) ? keys.indexOf(currentKey) : keys.indexOf(this.list.firstVisibleKey() ?? '') - (event.key === 'j' ? 1 : 0);
    const next = keys[Math.max(0, Math.min(keys.length - 1, from + (event.key === 'j' ? 1 : -1)))];
    if (!next) return;
    event.preventDefault();
    this.focusRow(next);
  }
}

/** After a page of `limit` was read: a short page, or one reaching the first event, leaves nothing older to read. */
function olderState(events: StoredEvent[], limit: number): GapRow['state'] {
  return events.length < limit || events[0]!.seq <= 1 ? 'start' : 'more';
}
