import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { buildConsole, CONSOLE_DIST_DIR } from '../src/console/bundle.ts';

/** `npm run build:console`: builds `console/dist/` and prints each file's size, raw and gzipped. */
const ms = await buildConsole();
for (const name of ['console.js', 'console.css', 'share.js']) {
  const bytes = fs.readFileSync(path.join(CONSOLE_DIST_DIR, name));
  console.log(`${name}: ${(bytes.length / 1024).toFixed(1)} KiB, ${(gzipSync(bytes).length / 1024).toFixed(1)} KiB gzipped`);
}
console.log(`built in ${Math.round(ms)} ms`);
