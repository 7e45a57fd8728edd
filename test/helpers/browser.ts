import fs from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

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
