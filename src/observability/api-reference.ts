import fs from 'node:fs';
import { createRequire } from 'node:module';
import { SPEC_PATH } from '../package-root.ts';

/**
 * The API reference: Redoc's standalone bundle, served from the `redoc` npm package (no CDN: the
 * machine may be offline), rendering the spec the server itself loads.
 */

const require = createRequire(import.meta.url);

/** Where the Redoc bundle lives in node_modules. */
export const REDOC_BUNDLE_PATH = require.resolve('redoc/bundles/redoc.standalone.js');

/**
 * The page at `/docs`. URLs are relative, so the page also works behind a proxy that mounts the
 * service under a path prefix. Redoc starts itself on the `<redoc>` element, so there is no inline
 * script and the page's Content-Security-Policy can allow scripts from this origin only.
 */
export const API_REFERENCE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agent Platform Control-Plane API reference</title>
<link rel="icon" href="data:,">
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<redoc spec-url="openapi.yaml" expand-responses="200,201"></redoc>
<script src="docs/redoc.standalone.js"></script>
</body>
</html>
`;

/**
 * Nothing leaves this origin: Redoc's search runs in a worker made from a blob, its styles are
 * injected at run time, and its "API docs by Redocly" logo (from a CDN) is refused, which Redoc
 * handles by not showing it.
 */
export const API_REFERENCE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  'worker-src blob:',
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Both files are read on first use and then kept: they never change while the process runs. */
let bundle: Buffer | undefined;
let spec: string | undefined;

export function redocBundle(): Buffer {
  bundle ??= fs.readFileSync(REDOC_BUNDLE_PATH);
  return bundle;
}

export function specText(): string {
  spec ??= fs.readFileSync(SPEC_PATH, 'utf8');
  return spec;
}
