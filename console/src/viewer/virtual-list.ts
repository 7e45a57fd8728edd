import { h } from '../dom.ts';

/**
 * Windowed rendering of a long list of rows of varying height: only the rows near the viewport are
 * in the DOM, between two spacers sized from measured (or estimated) heights. The row the reader is
 * looking at stays put when rows are added above it (older pages) or change height; a reader at
 * the bottom stays at the bottom as rows arrive.
 */
export interface Keyed {
  readonly key: string;
}

const OVERSCAN_PX = 800;
const NEAR_TOP_PX = 1200;
const ESTIMATE_PX = 90;

export class VirtualList<T extends Keyed> {
  readonly element: HTMLElement;
  private items: T[] = [];
  private readonly heights = new Map<string, number>();
  private readonly rendered = new Map<string, HTMLElement>();
  private readonly topSpacer = h('div', { class: 'spacer', 'aria-hidden': 'true' });
  private readonly bottomSpacer = h('div', { class: 'spacer', 'aria-hidden': 'true' });
  private readonly content = h('div', { class: 'rows' });
  private readonly resizes: ResizeObserver;
  private anchor: { key: string; offset: number } | undefined;
  private atBottom = true;
  private frame = 0;

  constructor(
    private readonly renderItem: (item: T) => HTMLElement,
    private readonly onNearTop: () => void,
    label: string,
  ) {
    this.element = h('section', { class: 'scroller', tabindex: 0, 'aria-label': label }, this.topSpacer, this.content, this.bottomSpacer);
    this.element.addEventListener('scroll', () => this.onScroll(), { passive: true });
    this.resizes = new ResizeObserver((entries) => {
      let changed = false;
      for (const entry of entries) {
        const element = entry.target as HTMLElement;
        const key = element.dataset.key!;
        const height = element.offsetHeight;
        if (this.rendered.get(key) === element && this.heights.get(key) !== height) {
          this.heights.set(key, height);
          changed = true;
        }
      }
      if (changed) this.settle();
    });
  }

  get length(): number {
    return this.items.length;
  }

  /** Rows added before the first one (an older page): what the reader sees does not move. */
  prepend(items: T[]): void {
    this.items = [...items, ...this.items];
    this.settle();
  }

  /** Rows added at the end (live events). */
  append(items: T[]): void {
    this.items.push(...items);
    this.settle();
  }

  /** Removes the row with `key`. */
  remove(key: string): void {
    this.items = this.items.filter((item) => item.key !== key);
    this.drop(key);
    this.settle();
  }

  /** Renders the row with `key` again (its content changed). */
  refresh(key: string): void {
    if (this.rendered.has(key)) this.drop(key);
    this.settle();
  }

  find(key: string): T | undefined {
    return this.items.find((item) => item.key === key);
  }

  /** The rows, in order (for moving between them). */
  keys(): string[] {
    return this.items.map((item) => item.key);
  }

  /** Scrolls row `key` to the top of the view and returns its element (rendered by then). */
  scrollToKey(key: string): HTMLElement | undefined {
    const index = this.items.findIndex((item) => item.key === key);
    if (index < 0) return undefined;
    this.atBottom = false;
    this.element.scrollTop = this.offsets()[index]!;
    this.render();
    // Heights measured while rendering may have moved the row: place it once more.
    this.element.scrollTop = this.offsets()[index]!;
    this.render();
    this.captureAnchor();
    return this.rendered.get(key);
  }

  /** The key of the first row at or below the top of the view. */
  firstVisibleKey(): string | undefined {
    const offsets = this.offsets();
    const top = this.element.scrollTop;
    for (let i = 0; i < this.items.length; i++) if (offsets[i + 1]! > top + 4) return this.items[i]!.key;
    return undefined;
  }

  /** Shows the end of the list and keeps following it. */
  scrollToBottom(): void {
    this.atBottom = true;
    this.settle();
  }

  destroy(): void {
    this.resizes.disconnect();
    cancelAnimationFrame(this.frame);
  }

  private drop(key: string): void {
    const element = this.rendered.get(key);
    if (element) this.resizes.unobserve(element);
    element?.remove();
    this.rendered.delete(key);
  }

  private onScroll(): void {
    const { scrollTop, scrollHeight, clientHeight } = this.element;
    this.atBottom = scrollHeight - scrollTop - clientHeight < 24;
    cancelAnimationFrame(this.frame);
    this.frame = requestAnimationFrame(() => {
      this.render();
      this.captureAnchor();
      if (this.element.scrollTop < NEAR_TOP_PX) this.onNearTop();
    });
  }

  /** Renders, puts the reader back where they were, and renders what that brought into view. */
  private settle(): void {
    this.render();
    this.restoreAnchor();
    this.render();
    this.captureAnchor();
  }

  private offsets(): number[] {
    const offsets = new Array<number>(this.items.length + 1);
    offsets[0] = 0;
    for (let i = 0; i < this.items.length; i++) offsets[i + 1] = offsets[i]! + (this.heights.get(this.items[i]!.key) ?? ESTIMATE_PX);
    return offsets;
  }

  private render(): void {
    const offsets = this.offsets();
    const total = offsets[this.items.length]!;
    const top = this.atBottom ? Math.max(0, total - this.element.clientHeight) : this.element.scrollTop;
    const bottom = top + this.element.clientHeight;
    let start = 0;
    while (start < this.items.length && offsets[start + 1]! < top - OVERSCAN_PX) start++;
    let end = start;
    while (end < this.items.length && offsets[end]! < bottom + OVERSCAN_PX) end++;
    const wanted = new Set<string>();
    const elements: HTMLElement[] = [];
    for (let i = start; i < end; i++) {
      const item = this.items[i]!;
      wanted.add(item.key);
      let element = this.rendered.get(item.key);
      if (!element) {
        element = this.renderItem(item);
        element.dataset.key = item.key;
        this.rendered.set(item.key, element);
        this.resizes.observe(element);
      }
      elements.push(element);
    }
    for (const key of [...this.rendered.keys()]) if (!wanted.has(key)) this.drop(key);
    this.topSpacer.style.height = `${offsets[start]}px`;
    this.bottomSpacer.style.height = `${total - offsets[end]!}px`;
    const current = this.content.children;
    if (current.length !== elements.length || elements.some((element, i) => current[i] !== element)) {
      // Moving a focused row out of the document and back would drop its focus (to the body).
      const focused = document.activeElement instanceof HTMLElement && this.content.contains(document.activeElement) ? document.activeElement : undefined;
      this.content.replaceChildren(...elements);
      if (focused?.isConnected && document.activeElement !== focused) focused.focus({ preventScroll: true });
    }
    for (const element of elements) {
      const key = element.dataset.key!;
      if (!this.heights.has(key)) this.heights.set(key, element.offsetHeight);
    }
  }

  private captureAnchor(): void {
    const scrollTop = this.element.scrollTop;
    const offsets = this.offsets();
    for (let i = 0; i < this.items.length; i++) {
      if (offsets[i + 1]! > scrollTop) {
        this.anchor = { key: this.items[i]!.key, offset: offsets[i]! - scrollTop };
        return;
      }
    }
    this.anchor = undefined;
  }

  private restoreAnchor(): void {
    if (this.atBottom) {
      this.element.scrollTop = this.element.scrollHeight;
      return;
    }
    if (!this.anchor) return;
    const index = this.items.findIndex((item) => item.key === this.anchor!.key);
    if (index < 0) return;
    const target = this.offsets()[index]! - this.anchor.offset;
    if (Math.abs(this.element.scrollTop - target) > 1) this.element.scrollTop = target;
  }
}
