import type { CheckoutSession } from './entities.ts';

/**
 * The checkout page: plain HTML with no script, in the console's look (its style sheet, from this
 * origin). For a pending local session it holds the Confirm and Cancel forms; otherwise it tells
 * the state.
 */

/** Headers of every checkout page: the page's address is the session's capability, so it is not
 * leaked as a referrer, cached, framed, or allowed to load or post anything elsewhere. */
export const CHECKOUT_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy':
    "default-src 'none'; style-src 'self'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
};

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char]!);
}

/** The console's money format (two decimals from $1 up), so the checkout reads as the account page does. */
const dollars = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 2 });

export type ReturnOutcome = 'success' | 'cancel';

function stateParagraph(session: CheckoutSession, outcome: ReturnOutcome | undefined): string | undefined {
  const paid = `<p class="state" data-status="completed">Payment completed: ${dollars.format(session.amountUsd)} has been added to your credit.</p>`;
  switch (session.status) {
    case 'completed':
      return paid;
    case 'cancelled':
      return '<p class="state" data-status="cancelled">This checkout was cancelled. Nothing was charged.</p>';
    case 'expired':
      return '<p class="state" data-status="expired">This checkout has expired. Nothing was charged; start a new one.</p>';
    case 'pending':
      if (session.provider === 'local') {
        return `<p class="state" data-status="pending">Local checkout for development and demos: no money moves.</p>
  <div class="actions">
  <form method="post" action="/billing/checkout/${session.id}/confirm"><button type="submit" id="confirm" class="btn primary">Confirm payment</button></form>
  <form method="post" action="/billing/checkout/${session.id}/cancel"><button type="submit" id="cancel" class="btn">Cancel</button></form>
  </div>`;
      }
      return outcome === 'cancel'
        ? `<p class="state" data-status="pending">The payment was not completed. <a href="${escapeHtml(session.redirectUrl)}">Return to Stripe</a> to pay before it expires.</p>`
        : '<p class="state" data-status="pending">Waiting for Stripe to confirm the payment; reload this page in a moment.</p>';
  }
}

/** The page around `body`, in the console's look. */
function pageShell(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/console/console.css">
</head>
<body>
<header class="topbar"><span class="brand">Agent Platform</span></header>
<main class="narrow">
<section class="card checkout">
${body}
</section>
<p class="meta"><a href="/#/account">Back to your account</a></p>
</main>
</body>
</html>
`;
}

/** The whole page for `session`; `outcome` is what Stripe's return URL says happened. */
export function renderCheckoutPage(session: CheckoutSession, outcome?: ReturnOutcome): string {
  // Only a pending session can still expire: an ended one says so in its state line instead.
  const meta =
    session.status === 'pending'
      ? `<p class="meta">Session ${session.id} · expires <time datetime="${session.expiresAt.toISOString()}">${session.expiresAt.toISOString().replace('T', ' ').slice(0, 16)} UTC</time></p>`
      : `<p class="meta">Session ${session.id}</p>`;
  return pageShell(
    `Checkout: ${dollars.format(session.amountUsd)}`,
    `<h1>Add ${dollars.format(session.amountUsd)} of credit</h1>
  ${stateParagraph(session, outcome)}
  ${meta}`,
  );
}

/** The page for a checkout id that does not exist (a mistyped or very old link). */
export function renderCheckoutNotFoundPage(): string {
  return pageShell(
    'Checkout not found',
    `<h1>Checkout not found</h1>
  <p class="state" data-status="not_found">There is no checkout at this address. Nothing was charged; start a new one from your account.</p>`,
  );
}
