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
/** The shared page's viewer (`/share/{token}`): the same cards, none of the console's other pages. */
const SHARE_SCRIPT = path.join(CONSOLE_DIST_DIR, 'share.js');

export interface ConsoleAssets {
  readonly script: Buffer;
  readonly styles: Buffer;
  readonly shareScript: Buffer;
  /** Content hashes: the page links `console.js?v=<scriptHash>`, so a new build is a new address. */
  readonly scriptHash: string;
  readonly stylesHash: string;
  readonly shareScriptHash: string;
}

/** Builds the bundle into `console/dist/` (minified); returns how long it took in milliseconds. */
export async function buildConsole(): Promise<number> {
  const started = performance.now();
  // Loaded only when building: a server with a built bundle never loads esbuild.
  const { build } = await import('esbuild');
  const { outputFiles } = await build({
    entryPoints: [
      { in: path.join(CONSOLE_SOURCE_DIR, 'main.ts'), out: 'console' },
      { in: path.join(CONSOLE_SOURCE_DIR, 'console.css'), out: 'console' },
      { in: path.join(CONSOLE_SOURCE_DIR, 'share.ts'), out: 'share' },
    ],
    outdir: CONSOLE_DIST_DIR,
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
    tsconfig: path.join(PACKAGE_ROOT, 'console', 'tsconfig.json'),
    legalComments: 'none',
    logLevel: 'silent',
    write: false,
  });
  // Each file whole or not at all: another process (a server, a test shard) may read it while this one builds.
  fs.mkdirSync(CONSOLE_DIST_DIR, { recursive: true });
  for (const file of outputFiles) {
    const partial = `${file.path}.${process.pid}.tmp`;
    fs.writeFileSync(partial, file.contents);
    fs.renameSync(partial, file.path);
  }
  assets = undefined;
  return performance.now() - started;
}

let assets: Promise<ConsoleAssets> | undefined;

/** The built files, read once (built first when missing). */
export function consoleAssets(): Promise<ConsoleAssets> {
  assets ??= (async () => {
    if (!consoleIsBuilt()) await buildConsole();
    const script = fs.readFileSync(SCRIPT);
    const styles = fs.readFileSync(STYLES);
    const shareScript = fs.readFileSync(SHARE_SCRIPT);
    return {
      script,
      styles,
      shareScript,
      scriptHash: contentHashOf(script),
      stylesHash: contentHashOf(styles),
      shareScriptHash: contentHashOf(shareScript),
    };
  })();
  // A failed build is not kept: the next request tries again.
  assets.catch(() => (assets = undefined));
  return assets;
}

/** True when `console/dist/` holds every file. */
export function consoleIsBuilt(): boolean {
  return fs.existsSync(SCRIPT) && fs.existsSync(STYLES) && fs.existsSync(SHARE_SCRIPT);
}
