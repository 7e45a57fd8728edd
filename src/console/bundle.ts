import fs from 'node:fs';
import path from 'node:path';
import { PACKAGE_ROOT } from '../package-root.ts';
import { contentHashOf } from '../crypto/content-hash.ts';

/**
 * The console's bundle: `console/src` (TypeScript, plain DOM) built by esbuild into the ignored
 * `console/dist/`. `npm run build` writes it; the server builds it on first use when it is missing,
 * so `npm start` on a fresh clone serves a working console.
 */

export const CONSOLE_SOURCE_DIR = path.join(PACKAGE_ROOT, 'console', 'src');
export const CONSOLE_DIST_DIR = path.join(PACKAGE_ROOT, 'console', 'dist');
const SCRIPT = path.join(CONSOLE_DIST_DIR, 'console.js');
const STYLES = path.join(CONSOLE_DIST_DIR, 'console.css');

export interface ConsoleAssets {
  readonly script: Buffer;
  readonly styles: Buffer;
  /** Content hashes: the page links `console.js?v=<scriptHash>`, so a new build is a new address. */
  readonly scriptHash: string;
  readonly stylesHash: string;
}

/** Builds the bundle into `console/dist/` (minified); returns how long it took in milliseconds. */
export async function buildConsole(): Promise<number> {
  const started = performance.now();
  // Loaded only when building: a server with a built bundle never loads esbuild.
  const { build } = await import('esbuild');
  await build({
    entryPoints: [path.join(CONSOLE_SOURCE_DIR, 'main.ts'), path.join(CONSOLE_SOURCE_DIR, 'console.css')],
    outdir: CONSOLE_DIST_DIR,
    entryNames: 'console',
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
    tsconfig: path.join(PACKAGE_ROOT, 'console', 'tsconfig.json'),
    legalComments: 'none',
    logLevel: 'silent',
  });
  assets = undefined;
  return performance.now() - started;
}

let assets: Promise<ConsoleAssets> | undefined;

/** The built files, read once (built first when missing). */
export function consoleAssets(): Promise<ConsoleAssets> {
  assets ??= (async () => {
    if (!fs.existsSync(SCRIPT) || !fs.existsSync(STYLES)) await buildConsole();
    const script = fs.readFileSync(SCRIPT);
    const styles = fs.readFileSync(STYLES);
    return { script, styles, scriptHash: contentHashOf(script), stylesHash: contentHashOf(styles) };
  })();
  // A failed build is not kept: the next request tries again.
  assets.catch(() => (assets = undefined));
  return assets;
}

/** True when `console/dist/` holds both files. */
export function consoleIsBuilt(): boolean {
  return fs.existsSync(SCRIPT) && fs.existsSync(STYLES);
}
