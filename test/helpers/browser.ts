/// <reference lib="dom" />
// DOM types for the callbacks that run in the page (page.evaluate).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { expect } from 'chai';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { Config } from '../../src/config.ts';
import { buildConsole } from '../../src/console/bundle.ts';
import { listenTestApp } from './app.ts';

/**
 * Headless Chromium for tests that must work in a real browser (the local checkout page, the API
 * reference). Debian's `chromium` package is used through playwright-core; nothing is downloaded.
 * `.ci/run` installs the package; where no browser is installed the test is skipped with a message
 * saying how to get one.
 */

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];

/** The Chromium executable to drive, if one is installed. */
export function chromiumPath(): string | undefined {
  return CANDIDATES.find((candidate): candidate is string => Boolean(candidate) && fs.existsSync(candidate!));
}

/**
 * Flags for a closed network: without the background-networking ones Chromium keeps trying to reach
 * Google's hosts. `--no-sandbox` because CI runs as root, where Chromium's sandbox cannot start.
 */
const FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * Launches headless Chromium, or skips the calling test (or hook) when none is installed.
 * Close the browser in an `after` hook.
 */
export async function launchBrowserOrSkip(context: Mocha.Context): Promise<Browser> {
  const executablePath = chromiumPath();
  if (!executablePath) {
    console.log('      skipped: no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH)');
    context.skip();
  }
  return chromium.launch({ executablePath, headless: true, args: FLAGS });
}

/** Screenshots for people to look at (ignored by git). */
export const SCREENSHOTS = path.join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 375, height: 760 };

/**
 * Collects what goes wrong in `page` into `errors`: script errors, console errors, CSP violations and
 * dialogs. Failed resource loads are statuses the console handles (a wrong token's 401, the admin
 * probe's 403), not errors, unless `failedLoads`.
 */
export function watchErrors(page: Page, errors: string[], { failedLoads = false } = {}): void {
  page.on('pageerror', (error) => errors.push(String(error)));
  page.on('console', (message) => {
    if (message.type() === 'error' && (failedLoads || !message.text().startsWith('Failed to load resource'))) errors.push(message.text());
  });
  page.on('dialog', (dialog) => {
    errors.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
}

export interface BrowserSuite {
  readonly browser: Browser;
  readonly baseUrl: string;
  /** What went wrong in the pages of `newPage` during the current test (see `watchErrors`). */
  readonly errors: string[];
  /** A page 1280 px wide in a context of its own (no session of another page), closed after the test. */
  newPage(): Promise<Page>;
  /** Opens the console at `hash` and signs in with `token`. */
  signIn(page: Page, token: string, hash?: string): Promise<void>;
}

/**
 * Registers the hooks of a suite run in headless Chromium against a real listening server (the
 * console built first unless `buildConsole: false`); the suite is skipped, with a message, where no
 * Chromium is installed.
 */
export function browserSuite(options: { app?: Partial<Config>; buildConsole?: boolean; failedLoads?: boolean } = {}): BrowserSuite {
  let browser: Browser | undefined;
  let listening: Awaited<ReturnType<typeof listenTestApp>> | undefined;
  const pages: Page[] = [];
  const errors: string[] = [];
  before(async function () {
    browser = await launchBrowserOrSkip(this);
    if (options.buildConsole !== false) await buildConsole();
    fs.mkdirSync(SCREENSHOTS, { recursive: true });
    listening = await listenTestApp(options.app);
  });
  after(async () => {
    await browser?.close();
    await listening?.liveStreams.close();
    await listening?.close();
  });
  beforeEach(() => {
    errors.length = 0;
  });
  afterEach(async () => {
    for (const page of pages.splice(0)) await page.close();
  });
  const suite: BrowserSuite = {
    get browser() {
      return browser!;
    },
    get baseUrl() {
      return listening!.baseUrl;
    },
    errors,
    async newPage() {
      const page = await browser!.newPage({ viewport: DESKTOP });
      pages.push(page);
      watchErrors(page, errors, { failedLoads: options.failedLoads });
      return page;
    },
    async signIn(page, token, hash = '') {
      await page.goto(`${suite.baseUrl}/${hash}`);
      await page.fill('#token', token);
      await page.click('#sign-in button[type=submit]');
      await page.locator('#sign-out').waitFor();
    },
  };
  return suite;
}

let axeSource: string | undefined;
/** axe-core's checks of the page as it is now (WCAG 2 A/AA and best practices). */
export async function expectAccessible(page: Page): Promise<void> {
  axeSource ??= fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (context: unknown, options: unknown) => Promise<{ violations: { id: string; nodes: { target: unknown }[] }[] }> } }).axe;
    const result = await axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => JSON.stringify(node.target)).join(', ')}`);
  });
  expect(violations).to.deep.equal([]);
}

/** The page is exactly as wide as a 375 px viewport (nothing overflows sideways) and passes axe there; `atPhone` runs before it goes back to 1280 px. */
export async function expectFitsPhone(page: Page, atPhone?: () => Promise<unknown>): Promise<void> {
  await page.setViewportSize(PHONE);
  await page.waitForTimeout(150);
  const widths = await page.evaluate(() => ({ document: document.documentElement.scrollWidth, viewport: window.innerWidth, body: document.body.scrollWidth }));
  expect(widths.document, `document width at 375 px (${page.url()})`).to.equal(widths.viewport);
  expect(widths.body).to.be.at.most(widths.viewport);
  await expectAccessible(page);
  await atPhone?.();
  await page.setViewportSize(DESKTOP);
}

/**
 * Screenshots at 1280 and 375 px wide (full page), each also in dark (the viewport). `checked`: axe
 * in dark too, and at 375 px `expectFitsPhone`.
 */
export async function photograph(page: Page, name: string, { checked = false } = {}): Promise<void> {
  const shoot = async (width: number) => {
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-${width}.png`), fullPage: true });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-${width}-dark.png`) });
    if (checked && width === DESKTOP.width) await expectAccessible(page);
    await page.emulateMedia({ colorScheme: 'light' });
  };
  await shoot(DESKTOP.width);
  if (checked) return expectFitsPhone(page, () => shoot(PHONE.width));
  await page.setViewportSize(PHONE);
  await page.waitForTimeout(150);
  await shoot(PHONE.width);
  await page.setViewportSize(DESKTOP);
}
