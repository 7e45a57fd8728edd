/**
 * The console's whole view layer: elements are built with `h()` and text is only ever set through
 * `textContent` / text nodes. Nothing in the console assigns `innerHTML`, so agent output (hostile
 * input) can never become markup.
 */

type Child = Node | string | number | false | null | undefined | Child[];
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

/** Creates an element: `on*` keys become listeners, `true` booleans attributes, the rest attributes. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs | null = null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (typeof value === 'function') element.addEventListener(name.slice(2), value);
      else element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Creates an SVG element (charts); attributes and children as `h()` takes them, text only as text nodes. */
export function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number | null | undefined> | null = null, ...children: Child[]): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs ?? {})) if (value !== null && value !== undefined) element.setAttribute(name, String(value));
  append(element, children);
  return element;
}

/** Appends children (strings as text nodes; arrays flattened; empty values skipped). */
export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** Replaces every child of `parent`. */
export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const timeOnly = new Intl.DateTimeFormat(undefined, { timeStyle: 'medium' });

/** `<time>` with a readable local date and the ISO instant in `datetime` and the tooltip. */
export function time(iso: string | null | undefined, style: 'date' | 'time' = 'date'): HTMLElement | string {
  if (!iso) return '–';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return h('time', { datetime: date.toISOString(), title: date.toISOString() }, (style === 'time' ? timeOnly : dateTime).format(date));
}

/** "3 minutes ago" style, for lists. */
export function relative(iso: string | null | undefined): HTMLElement | string {
  if (!iso) return '–';
  const date = new Date(iso);
  const seconds = Math.round((Date.now() - date.getTime()) / 1000);
  const format = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  const steps: [number, Intl.RelativeTimeFormatUnit][] = [[60, 'second'], [60, 'minute'], [24, 'hour'], [30, 'day'], [12, 'month'], [Infinity, 'year']];
  let value = -seconds;
  for (const [size, unit] of steps) {
    if (Math.abs(value) < size) return h('time', { datetime: date.toISOString(), title: dateTime.format(date) }, format.format(value, unit));
    value = Math.round(value / size);
  }
  return iso;
}

const moneyFormats = new Map<string, Intl.NumberFormat>();

/** The one money format: two decimals from 1 up, up to four below (so $0.0012 is not $0.00). */
export function formatMoney(amount: number, currency = 'USD'): string {
  const small = Math.abs(amount) < 1 && amount !== 0;
  const key = `${currency}:${small}`;
  let format = moneyFormats.get(key);
  if (!format) {
    format = new Intl.NumberFormat(undefined, { style: 'currency', currency, minimumFractionDigits: 2, maximumFractionDigits: small ? 4 : 2 });
    moneyFormats.set(key, format);
  }
  return format.format(amount);
}

/** An amount as `formatMoney` shows it, the exact micro-dollars in its tooltip; "–" when unknown. */
export function money(amount: number | null | undefined, micro?: number | null, currency = 'USD'): HTMLElement | string {
  if (amount === null || amount === undefined) return '–';
  const exact = micro ?? Math.round(amount * 1_000_000);
  return h('span', { class: 'money', title: `${exact.toLocaleString()} micro-${currency === 'USD' ? 'dollars' : currency}` }, formatMoney(amount, currency));
}

/** A status badge: the value is shown as text and styled through `data-status`. */
export function badge(status: string | null | undefined): HTMLElement {
  const value = status ?? 'unknown';
  return h('span', { class: 'badge', 'data-status': value }, value.replaceAll('_', ' '));
}

/** A short notice (info or error) announced to screen readers. */
export function notice(text: string, kind: 'info' | 'error' = 'info'): HTMLElement {
  return h('p', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/** Human size of a string's length, e.g. "1.0 MB". */
export function sizeOf(length: number): string {
  if (length < 1024) return `${length} characters`;
  if (length < 1024 * 1024) return `${(length / 1024).toFixed(1)} KB`;
  return `${(length / 1024 / 1024).toFixed(1)} MB`;
}

/** Copies `text` and says so on the button. */
export function copyButton(text: string, label = 'Copy'): HTMLButtonElement {
  const button = h('button', { type: 'button', class: 'btn small' }, label);
  button.addEventListener('click', () => {
    void navigator.clipboard?.writeText(text).then(
      () => (button.textContent = 'Copied'),
      () => (button.textContent = 'Copy failed: select the text'),
    );
  });
  return button;
}
