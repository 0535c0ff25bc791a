// The status page says why eviction waits where it does, escaped like everything else.
import assert from "node:assert/strict";
import { renderStatusPage } from "../../src/http/status_page.ts";

Deno.test("status page: a partition whose eviction waits is listed with the reason", () => {
  const info = { store: "fs store", uptimeSeconds: 5, ready: true };
  assert.doesNotMatch(renderStatusPage([], info), /Eviction waiting/);
  const html = renderStatusPage([], {
    ...info,
    evictionBlocked: [
      { partition: "0/0/1", text: "eviction blocked by consumer offset 41: <segment 0>" },
    ],
  });
  assert.match(html, /<h2>Eviction waiting<\/h2>/);
  assert.match(
    html,
    /<li class="bad">0\/0\/1: eviction blocked by consumer offset 41: &#60;segment 0&#62;<\/li>/,
  );
});
