/**
 * A small page that follows one conversation live: asks for an access token (kept in this tab's
 * sessionStorage only), trades it for a single-use stream ticket, opens an EventSource, and after
 * any disconnection gets a new ticket and resumes after the last event id it saw (`after_seq`).
 * `conversationId` is a canonical UUID (validated by the spec), so it is safe to embed.
 */
export function liveConversationPage(conversationId: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Live conversation ${conversationId}</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; }
  #events { list-style: none; padding: 0; font-family: ui-monospace, monospace; }
  #events li { border-bottom: 1px solid #ddd; padding: .25rem 0; white-space: pre-wrap; word-break: break-all; }
  #delta { color: #555; font-style: italic; white-space: pre-wrap; }
  .muted { color: #777; }
</style>
</head>
<body>
<h1>Conversation <code>${conversationId}</code></h1>
<form id="login"><label>Access token <input id="token" type="password" autocomplete="off" size="50"></label> <button>Follow</button></form>
<p>Status: <strong id="status">–</strong> <span id="connection" class="muted">not connected</span></p>
<p id="delta"></p>
<ol id="events"></ol>
<script>
"use strict";
const conversationId = ${JSON.stringify(conversationId)};
const base = "/api/v1/conversations/" + conversationId + "/events";
const $ = (id) => document.getElementById(id);
let lastSeq = 0;
let source;

async function follow() {
  const token = sessionStorage.getItem("accessToken");
  if (!token) return;
  $("connection").textContent = "connecting…";
  const response = await fetch(base + "/stream-tickets", { method: "POST", headers: { "X-Access-Token": token } });
  if (!response.ok) {
    $("connection").textContent = "refused (" + response.status + ")";
    if (response.status === 401) sessionStorage.removeItem("accessToken");
    return;
  }
  const { ticket } = await response.json();
  source = new EventSource(base + "/stream?ticket=" + encodeURIComponent(ticket) + "&after_seq=" + lastSeq);
  source.onopen = () => ($("connection").textContent = "live");
  source.addEventListener("status", (message) => ($("status").textContent = JSON.parse(message.data).execution_status ?? "–"));
  source.addEventListener("delta", (message) => {
    const delta = JSON.parse(message.data);
    $("delta").textContent += delta.content ?? delta.reasoning_content ?? "";
  });
  source.addEventListener("event", (message) => {
    const stored = JSON.parse(message.data);
    lastSeq = stored.seq;
    $("delta").textContent = "";
    const item = document.createElement("li");
    item.textContent = "#" + stored.seq + " " + stored.event.kind + " " + JSON.stringify(stored.event);
    $("events").append(item);
  });
  // A ticket is single-use: instead of EventSource's own retry, reconnect with a new one.
  source.onerror = () => {
    source.close();
    $("connection").textContent = "reconnecting…";
    setTimeout(follow, 1000);
  };
}

$("login").addEventListener("submit", (submit) => {
  submit.preventDefault();
  sessionStorage.setItem("accessToken", $("token").value);
  $("token").value = "";
  source?.close();
  follow();
});
follow();
</script>
</body>
</html>
`;
}
