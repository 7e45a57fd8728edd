import fs from 'node:fs';
import path from 'node:path';

/**
 * The directory holding the service's package.json. Files the server reads at run time (the spec)
 * are found from here, so the same code works from `src/` under tsx and from `dist/src/` compiled.
 */
export const PACKAGE_ROOT = findPackageRoot(import.meta.dirname);

function findPackageRoot(start: string): string {
  for (let dir = start; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${start}`);
  }
}

/** The contract. The server loads this file itself; there is no second copy of it in code. */
export const SPEC_PATH = path.join(PACKAGE_ROOT, 'spec', 'openapi.yaml');
