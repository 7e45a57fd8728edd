import fs from 'node:fs';
import { createRequire } from 'node:module';
import { SPEC_PATH } from '../api/openapi.ts';

/**
 * The API reference: Redoc's standalone bundle, served from the `redoc` npm package (no CDN: the
 * machine may be offline), rendering the spec the server itself loads.
 */

const require = createRequire(import.meta.url);

/** Where the Redoc bundle lives in node_modules. */
export const REDOC_BUNDLE_PATH = require.resolve('redoc/bundles/redoc.standalone.js');

/**
 * The page at `/docs`. URLs are relative, so the page also works behind a proxy that mounts the
 * service under a path prefix. Redoc's search worker and fonts come from the bundle and the
 * browser; nothing is fetched from elsewhere.
 */
export const API_REFERENCE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Agent Platform Control-Plane API reference</title>
<style>body { margin: 0; padding: 0; }</style>
</head>
<body>
<div id="redoc"></div>
<script src="docs/redoc.standalone.js"></script>
<script>
  Redoc.init('openapi.yaml', { expandResponses: '200,201', hideDownloadButton: false }, document.getElementById('redoc'));
</script>
</body>
</html>
`;

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
