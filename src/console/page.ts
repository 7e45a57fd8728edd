/**
 * The console's one HTML page, linking the assets by content hash (cached for a year under that name). Everything it shows is built by `console.js` from the API's answers;
 * the page itself has no data and no inline script, so its Content-Security-Policy allows scripts,
 * styles and connections to this origin only.
 */
export function consoleHtml(versions: { scriptHash: string; stylesHash: string }): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Agent Platform console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="console/console.css?v=${versions.stylesHash}">
<script type="module" src="console/console.js?v=${versions.scriptHash}"></script>
</head>
<body>
<noscript>The console needs JavaScript. The API reference is at <a href="docs">/docs</a>.</noscript>
<div id="app"></div>
</body>
</html>
`;
}

/** Agent output is hostile: even if something slipped through, no script from elsewhere runs. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers of the page: not framed, not sniffed, no referrer (conversation ids live in the URL). */
export const CONSOLE_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
};
