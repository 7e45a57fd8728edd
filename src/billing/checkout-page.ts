import type { CheckoutSession } from './entities.ts';

/**
 * The checkout page: plain HTML with no script, styled inline (the CSP allows nothing else). For a
 * pending local session it holds the Confirm and Cancel forms; otherwise it tells the state.
 */

/** Headers of every checkout page: the page's address is the session's capability, so it is not
 * leaked as a referrer, cached, framed, or allowed to load or post anything elsewhere. */
export const CHECKOUT_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy':
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
};

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char]!);
}

export type ReturnOutcome = 'success' | 'cancel';

function stateParagraph(session: CheckoutSession, outcome: ReturnOutcome | undefined): string | undefined {
  const paid = `<p class="state" data-status="completed">Payment completed: ${session.amountUsd} USD has been added to your credit.</p>`;
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
  <form method="post" action="/billing/checkout/${session.id}/confirm"><button type="submit" id="confirm">Confirm payment</button></form>
  <form method="post" action="/billing/checkout/${session.id}/cancel"><button type="submit" id="cancel">Cancel</button></form>`;
      }
      return outcome === 'cancel'
        ? `<p class="state" data-status="pending">The payment was not completed. <a href="${escapeHtml(session.redirectUrl)}">Return to Stripe</a> to pay before it expires.</p>`
        : '<p class="state" data-status="pending">Waiting for Stripe to confirm the payment; reload this page in a moment.</p>';
  }
}

/** The whole page for `session`; `outcome` is what Stripe's return URL says happened. */
export function renderCheckoutPage(session: CheckoutSession, outcome?: ReturnOutcome): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Checkout: ${session.amountUsd} USD</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem; color: #222; }
  form { display: inline-block; margin-right: 0.5rem; }
  button { font-size: 1rem; padding: 0.5rem 1.25rem; cursor: pointer; }
  #confirm { background: #1a7f37; color: #fff; border: 0; border-radius: 4px; }
  .meta { color: #666; font-size: 0.9rem; }
</style>
</head>
<body>
  <h1>Add ${session.amountUsd} USD of credit</h1>
  ${stateParagraph(session, outcome)}
  <p class="meta">Session ${session.id} · expires ${session.expiresAt.toISOString()}</p>
</body>
</html>
`;
}
