// The PromQL name scanner the deploy checks rely on: it finds every selected metric (so a
// dashboard querying `up` or a typo fails the check) and nothing else.
import assert from "node:assert/strict";
import { metricNames, ruleExpressions, scrapedNames } from "./_promql.ts";

Deno.test("metric names in PromQL: selectors yes; functions, labels, keywords, variables no", () => {
  const names = (e: string) => [...metricNames(e)].sort();
  assert.deepEqual(names("sum(rate(up[5m]))"), ["up"]);
  assert.deepEqual(
    names(
      'histogram_quantile(0.99, sum by (op, le) (rate(tierd_store_request_duration_seconds_bucket{instance=~"$instance",op!="get"}[$__rate_interval])))',
    ),
    ["tierd_store_request_duration_seconds_bucket"],
  );
  assert.deepEqual(
    names("a_total > b_total offset 30m and on (x) c_bytes >= 3 or vector(1) unless d"),
    ["a_total", "b_total", "c_bytes", "d"],
  );
  assert.deepEqual(names('tierd_x{outcome="rate(y)"} / 1e3'), ["tierd_x"]);
});

Deno.test("rule expressions, plain and block scalars; scraped names with histogram series", () => {
  const yaml = "      - alert: A\n        expr: up == 0\n      - alert: B\n        expr: >-\n" +
    "          sum(a)\n            > sum(b)\n        for: 5m\n";
  assert.deepEqual(ruleExpressions(yaml), ["up == 0", "sum(a) > sum(b)"]);
  const scrape = "# HELP h x\n# TYPE h histogram\n# HELP g y\n# TYPE g gauge\ng 1\n";
  assert.deepEqual([...scrapedNames(scrape)].sort(), ["g", "h", "h_bucket", "h_count", "h_sum"]);
});
