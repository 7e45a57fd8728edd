import { h } from '../../dom.ts';
import { safeUrl } from '../markdown.ts';
import { failed, output, str, textOf, type Fields } from './common.ts';
import { type CardFamily } from './family.ts';

/** Browser tools: what was done (URL, element, text), the page's text, and its screenshot, bounded. */

/** Screenshots larger than this (base64 characters, ~3 MB decoded) are offered, not shown. */
const SCREENSHOT_LIMIT = 4_000_000;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function describe(action: Fields): string {
  const kind = String(action.kind ?? '');
  const name = kind.replace(/^Browser/, '').replace(/Action$/, '').replace(/([a-z])([A-Z])/g, '$1 $2');
  if (typeof action.url === 'string') return `${name || 'Open'} ${action.url}`;
  if (typeof action.index === 'number') return `${name} element ${action.index}`;
  if (typeof action.tab_id === 'string') return `${name} ${action.tab_id}`;
  if (typeof action.direction === 'string') return `${name} ${action.direction}`;
  return name || 'Browser';
}

/** A PNG/JPEG/WebP data URL of a screenshot, or undefined when it is not a plain base64 image. */
function screenshotUrl(data: string): string | undefined {
  const match = /^data:image\/(png|jpeg|webp);base64,(.*)$/s.exec(data);
  const body = match ? match[2]! : data;
  if (!BASE64.test(body.slice(0, 4096)) || !BASE64.test(body.slice(-4096))) return undefined;
  return `data:image/${match ? match[1] : 'png'};base64,${body}`;
}

function screenshot(data: string): HTMLElement | null {
  const url = screenshotUrl(data);
  if (!url) return null;
  const image = () => h('img', { class: 'screenshot', src: url, alt: 'Screenshot of the page', loading: 'lazy', decoding: 'async' });
  if (data.length <= SCREENSHOT_LIMIT) return h('figure', { class: 'screenshot-figure' }, image());
  const button = h('button', { type: 'button', class: 'btn small' }, `Show the screenshot (${(data.length / 1.37 / 1048576).toFixed(1)} MB)`);
  const figure = h('figure', { class: 'screenshot-figure' }, button);
  button.addEventListener('click', () => figure.replaceChildren(image()));
  return figure;
}

export const browserCards: CardFamily = {
  name: 'browser',
  handlesAction: (kind, tool) => (kind.startsWith('Browser') && kind.endsWith('Action')) || tool.startsWith('browser_'),
  handlesObservation: (kind) => kind.startsWith('Browser') && kind.endsWith('Observation'),
  action(action) {
    const url = str(action.url);
    const safe = url ? safeUrl(url) : undefined;
    return {
      summary: describe(action),
      body: [
        url ? h('p', { class: 'path' }, 'URL ', safe ? h('a', { href: safe, rel: 'noopener noreferrer nofollow', target: '_blank', referrerpolicy: 'no-referrer' }, url) : h('code', null, url)) : null,
        typeof action.text === 'string' ? h('p', { class: 'path' }, 'Types ', h('code', null, action.text)) : null,
      ],
    };
  },
  observation(observation) {
    const text = textOf(observation.content) || str(observation.output) || str(observation.error) || '';
    const shot = str(observation.screenshot_data);
    return [text ? output(text, failed(observation), 'page') : null, shot ? screenshot(shot) : null];
  },
};
