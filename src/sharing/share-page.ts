/**
 * The shared conversation's page (`/share/{token}`). Like the console's, it holds no data and no
 * inline script: `share.js` reads the token from the address and builds the read-only viewer from the
 * shared API. Only the console's style sheet and the share script load; nothing leads into the console.
 */
export const SHARE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="robots" content="noindex, nofollow">
<title>Shared conversation · Agent Platform</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/console.css">
<script type="module" src="/console/share.js"></script>
</head>
<body>
<noscript>This shared conversation needs JavaScript to be shown.</noscript>
<div id="app"></div>
</body>
</html>
`;

/** The page for a link that does not open anything (any more): it says so, and nothing else. */
export const SHARE_GONE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="robots" content="noindex, nofollow">
<title>Link no longer available · Agent Platform</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/console.css">
</head>
<body>
<header class="topbar"><span class="brand">Agent Platform</span></header>
<main class="narrow">
<section class="card share-gone">
<h1>This link is no longer available</h1>
<p class="state" data-status="not_found">The conversation shared at this address cannot be shown: the link was revoked by its owner, has expired, or never existed. Ask whoever sent it for a new one.</p>
</section>
</main>
</body>
</html>
`;

/** The console's policy (src/console/page.ts) without forms: the page posts nothing. */
const SHARE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers of both pages: the token is in the address, so no referrer, no cache, no index, no frame. */
export const SHARE_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': SHARE_CSP,
  'X-Robots-Tag': 'noindex, nofollow',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
};
