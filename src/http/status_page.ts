// The status page (`GET /`): one self-contained HTML document — no external assets, so it works
// offline — showing the agent at a glance: readiness, a stall in red with its reason, the first
// pass's progress, the copy backlog with rate and ETA, the last pass and its errors, the cache,
// housekeeping, then a row per topic and per partition. It refreshes itself without a reload:
// a small inline script fetches `GET /?fragment=1` (the same markup, rendered here) every few
// seconds and swaps it in; without scripts a `<noscript>` meta refresh reloads the page.
import type { Problem, StatusJson } from "./status_model.ts";

/** Seconds between refreshes unless `?refresh=N` asks otherwise. */
export const DEFAULT_REFRESH_SECONDS = 5;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

/** `1.5 MiB`; bytes as a number or a decimal string. */
export function formatBytes(value: number | string): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = Number(value);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}

/** `3d 4h 5m 6s`, shorter for small values. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const parts = [d > 0 ? `${d}d` : "", d + h > 0 ? `${h}h` : "", d + h + m > 0 ? `${m}m` : ""];
  return [...parts.filter((x) => x !== ""), `${s % 60}s`].join(" ");
}

function formatTime(ms: number | undefined): string {
  if (ms === undefined) return "never";
  return new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

function formatRate(bytesPerSecond: number | null): string {
  return bytesPerSecond === null ? "—" : `${formatBytes(Math.round(bytesPerSecond))}/s`;
}

/** The ETA of a backlog; `short` for a table cell. */
function formatEta(
  seconds: number | null,
  lagSegments: number,
  o: { stalled?: boolean; short?: boolean } = {},
): string {
  if (lagSegments === 0 || seconds === 0) return "—";
  if (o.stalled) return "none while stalled";
  if (seconds !== null) return formatDuration(seconds);
  return o.short ? "unknown" : "unknown (nothing copied in the last minute)";
}

/** Longer reasons are cut in table cells; the whole text stays in the tooltip. */
const CELL_REASON = 160;

function percent(part: number, whole: number): string {
  return whole > 0 ? `${Math.min(100, (100 * part) / whole).toFixed(0)}%` : "—";
}

function problemsCell(problems: readonly Problem[]): string {
  if (problems.length === 0) return `<span class="ok">ok</span>`;
  return problems.map((p) => {
    const cut = p.reason.length > CELL_REASON ? `${p.reason.slice(0, CELL_REASON)}…` : p.reason;
    return `<div class="${p.severity}" data-problem="${p.kind}" title="${
      escapeHtml(p.reason)
    }"><b>${p.kind}</b>: ${escapeHtml(cut)}</div>`;
  }).join("");
}

const stalledIn = (problems: readonly Problem[]) => problems.some((p) => p.kind === "stalled");

function row(cells: readonly string[], cls = ""): string {
  return `<tr${cls ? ` class="${cls}"` : ""}>${cells.map((c) => `<td>${c}</td>`).join("")}</tr>`;
}

function table(head: readonly string[], rows: readonly string[], id: string): string {
  return `<table id="${id}">\n<tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr>\n${
    rows.join("\n")
  }\n</table>`;
}

function stallSection(s: StatusJson): string {
  if (!s.stalled) return "";
  if (!s.stalled.stalled) {
    return `<p id="stall" class="ok">Uploads are flowing (${s.stalled.throttled_requests} ` +
      `throttled requests since start).</p>`;
  }
  const since = s.stalled.since === null
    ? ""
    : ` since ${formatTime(s.stalled.since)} (${formatDuration((s.now - s.stalled.since) / 1000)})`;
  const c = s.stalled.cause;
  const failing = c
    ? ` (its copies failing since ${formatTime(c.since)}, ${c.failures} store ` +
      `fault${c.failures === 1 ? "" : "s"})`
    : "";
  return `<p id="stall" class="bad banner"><b>Uploads stalled${since}</b>: ${
    escapeHtml(s.stalled.reason ?? "store unreachable")
  }${failing} — ${s.stalled.throttled_requests} throttled requests since start. ` +
    "Nothing is copied or evicted meanwhile and the broker's disk grows; tierd resumes by " +
    "itself when the store answers. <code>tierd probe</code> names the cause.</p>";
}

function costSection(s: StatusJson): string {
  const r = s.store_requests;
  if (!r) return "";
  const money = (v: number) => `${escapeHtml(r.currency)} ${v < 1 ? v.toFixed(4) : v.toFixed(2)}`;
  const day = r.per_day === null ? "" : `, about ${money(r.per_day)} a day at this rate`;
  return `<p id="store-requests">Store requests since start: ${r.requests}, estimated ` +
    `${money(r.estimated_cost)}${day} (prices from [tiered_storage.request_prices]).</p>`;
}

/**
 * The first pass since start: while it runs, how far it got (copied of copied plus still to
 * copy). Once done, no progress bar: its work is over, and what is left to copy — segments the
 * broker sealed since, copies that failed — is the copy backlog's, not a first pass stuck at
 * some percent.
 */
function firstPassSection(s: StatusJson): string {
  const f = s.first_pass;
  if (!f) return "";
  if (f.done) {
    const copied = `${f.segments_copied} segments (${formatBytes(f.bytes_copied)})`;
    const left = f.segments_backlog - f.segments_copied;
    const rest = left > 0
      ? `; ${left} segments (${
        formatBytes(Number(f.bytes_backlog) - Number(f.bytes_copied))
      }) to copy now, in the copy backlog`
      : "; nothing left to copy";
    return `<p id="first-pass">First pass done: ${f.partitions_done} of ${f.partitions_total} ` +
      `partitions gone through, ${copied} copied since start${rest}.</p>`;
  }
  return `<p id="first-pass">First pass in progress: ${f.partitions_done} of ` +
    `${f.partitions_total} partitions, ${f.segments_copied} of ${f.segments_backlog} segments ` +
    `copied (${formatBytes(f.bytes_copied)} of ${formatBytes(f.bytes_backlog)}) ` +
    `<progress max="${Math.max(1, f.segments_backlog)}" value="${f.segments_copied}"></progress>` +
    ` ${percent(f.segments_copied, f.segments_backlog)}</p>`;
}

function copySection(s: StatusJson): string {
  const c = s.copy;
  const lag = c.lag_segments > 0 ? "warn" : "ok";
  return `<p id="backlog">Copy backlog: <span class="${lag}">${c.lag_segments} segments, ${
    formatBytes(c.lag_bytes)
  }</span> · rate ${formatRate(c.rate_bytes_per_second)} · ETA ${
    escapeHtml(formatEta(c.eta_seconds, c.lag_segments, { stalled: s.stalled?.stalled }))
  }</p>`;
}

function lastPassSection(s: StatusJson): string {
  const l = s.last_pass;
  if (!s.first_pass) return "";
  if (!l) return `<p id="last-pass">Last pass: none finished yet.</p>`;
  const errors = l.errors.length === 0
    ? `<span class="ok">no errors</span>`
    : `<span class="bad">${l.errors.length} error(s)</span><ul class="bad">${
      l.errors.slice(0, 10).map((e) => `<li>${escapeHtml(e)}</li>`).join("")
    }</ul>`;
  return `<p id="last-pass">Last pass: finished ${formatTime(l.finished_at)} (took ${
    formatDuration(l.duration_ms / 1000)
  }), ${l.copied} copied, ${l.failed} failed, ${l.evicted} evicted; ${errors}</p>`;
}

function cacheSection(s: StatusJson): string {
  const c = s.cache;
  if (!c) return "";
  const ratio = c.hit_ratio === null ? "no reads yet" : `${(100 * c.hit_ratio).toFixed(1)}%`;
  return `<p id="cache">Cache: ${formatBytes(c.bytes)} of ${formatBytes(c.budget_bytes)} (${
    percent(c.bytes, c.budget_bytes)
  }), ${c.objects} of ${c.max_objects} chunks · hit ratio ${ratio} (${c.hits} hits, ${c.misses} misses)</p>`;
}

function housekeepingSection(s: StatusJson): string {
  const h = s.housekeeping;
  if (!h) return "";
  const jobs = h.last_jobs.map((j) => {
    const counts = Object.entries(j.counts).map(([k, v]) => `${k} ${v}`).join(", ");
    const errors = j.errors.length > 0
      ? ` <span class="bad">${j.errors.length} error(s): ${escapeHtml(j.errors[0])}</span>`
      : "";
    return `<li>${escapeHtml(j.job)}: ${escapeHtml(counts || "nothing to do")}${
      j.complete ? "" : " (unfinished: quota)"
    }${errors}</li>`;
  }).join("");
  const unrepairable = h.unrepairable > 0
    ? `<span class="bad">${h.unrepairable} evicted segment(s) whose only copy is missing or damaged</span>`
    : `<span class="ok">no unrepairable copies</span>`;
  return `<div id="housekeeping">Housekeeping: last run ${
    formatTime(h.last_run ?? undefined)
  }, ${h.requests_used} ` +
    `requests; verify pass ${h.verify_in_progress ? "in progress" : "idle"}, last completed ${
      formatTime(h.last_verify_completed ?? undefined)
    }; ${unrepairable}${jobs ? `<ul>${jobs}</ul>` : ""}</div>`;
}

/**
 * The state column: the partition state's own word, unless it is `ok` while something is wrong
 * (a stall, a blocked eviction, damage): then the worst problem's kind, in its colour, so that no
 * row reads a green "ok" under a red banner.
 */
function stateCell(state: string | null, problems: readonly Problem[]): string {
  if (state === null) return "—";
  const worst = problems.find((p) => p.severity === "bad") ??
    problems.find((p) => p.severity === "warn");
  if (state === "ok" && worst) {
    return `<span class="${worst.severity}">${escapeHtml(worst.kind)}</span>`;
  }
  const cls = state === "ok" ? "ok" : state === "failed" ? "bad" : "warn";
  return `<span class="${cls}">${escapeHtml(state)}</span>`;
}

function backlogCell(lag: { segments: number; bytes: string }): string {
  return lag.segments === 0 ? "0" : `${lag.segments} (${formatBytes(lag.bytes)})`;
}

function topicsTable(s: StatusJson): string {
  const head = [
    "topic",
    "partitions",
    "state",
    "local",
    "remote",
    "copy backlog",
    "rate",
    "ETA",
    "tiered up to",
    "status",
  ];
  const rows = s.topics.map((t) =>
    row([
      `${t.stream}/${t.topic}`,
      String(t.partitions),
      stateCell(t.state, t.problems),
      formatBytes(t.local_bytes),
      formatBytes(t.remote_bytes),
      backlogCell(t.copy_lag),
      formatRate(t.copy_rate_bytes_per_second),
      escapeHtml(
        formatEta(t.eta_seconds, t.copy_lag.segments, {
          stalled: stalledIn(t.problems),
          short: true,
        }),
      ),
      t.tiered_up_to_offset ?? "—",
      problemsCell(t.problems),
    ], t.problems.some((p) => p.severity === "bad") ? "trouble" : "")
  );
  return table(head, rows, "topics");
}

function partitionsTable(s: StatusJson): string {
  const head = [
    "partition",
    "state",
    "format",
    "local",
    "remote",
    "segments local / uploaded / remote / dangling",
    "copy backlog",
    "rate",
    "ETA",
    "tiered up to",
    "status",
  ];
  const rows = s.partitions.map((p) =>
    row([
      `${p.stream}/${p.topic}/${p.partition}${
        p.first_pass_done === false ? " <i>(first pass)</i>" : ""
      }`,
      stateCell(p.state, p.problems),
      escapeHtml(p.format ?? "—"),
      formatBytes(p.local_bytes),
      formatBytes(p.remote_bytes),
      `${p.segments.local} / ${p.segments.uploaded} / ${p.segments.remote} / ${
        p.segments.dangling > 0 ? `<span class="warn">${p.segments.dangling}</span>` : "0"
      }`,
      backlogCell(p.copy_lag),
      formatRate(p.copy_rate_bytes_per_second),
      escapeHtml(
        formatEta(p.eta_seconds, p.copy_lag.segments, {
          stalled: stalledIn(p.problems),
          short: true,
        }),
      ),
      p.tiered_up_to_offset ?? "—",
      problemsCell(p.problems),
    ], p.problems.some((q) => q.severity === "bad") ? "trouble" : "")
  );
  return table(head, rows, "partitions");
}

/** The part of the page that refreshes (`GET /?fragment=1`). Every value is escaped. */
export function renderStatusFragment(s: StatusJson): string {
  const header = `<p id="summary">Store: ${escapeHtml(s.store)} · Uptime: ${
    formatDuration(s.uptime_seconds)
  } · ${
    s.ready
      ? `<span class="ok" id="ready">ready</span>`
      : `<span class="bad" id="ready">not ready</span> (store probe or journal replay pending)`
  } · updated ${formatTime(s.now)}</p>`;
  const body = s.partitions.length === 0
    ? "<p>No tiered partitions found.</p>"
    : `<h2>Topics</h2>\n${topicsTable(s)}\n<h2>Partitions</h2>\n${partitionsTable(s)}`;
  return [
    header,
    stallSection(s),
    costSection(s),
    firstPassSection(s),
    copySection(s),
    lastPassSection(s),
    cacheSection(s),
    housekeepingSection(s),
    body,
  ].filter((x) => x !== "").join("\n");
}

const STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em 2em; color: #222; background: #fff; }
h1 { margin: 0 0 0.3em; font-size: 1.5em; }
h2 { margin: 1.2em 0 0.3em; font-size: 1.15em; }
table { border-collapse: collapse; margin-bottom: 0.5em; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #ddd; text-align: right; vertical-align: top; }
th { background: #f4f4f4; font-weight: 600; }
th:first-child, td:first-child, td:last-child, th:last-child { text-align: left; }
td:last-child { max-width: 42em; }
tr.trouble td { background: #fff3f3; }
.bad { color: #b00000; }
.banner { border: 2px solid #b00000; background: #fff0f0; padding: 0.5em 0.8em; }
.warn { color: #a05a00; }
.ok { color: #176b1f; }
#refresh { font-size: 0.9em; }
ul { margin: 0.2em 0 0.4em 1.2em; padding: 0; }
progress { vertical-align: middle; }
footer { margin-top: 1.5em; color: #666; }
`;

/**
 * Renders the whole page.
 * @param refreshSeconds how often the page fetches its fragment again
 */
export function renderStatusPage(
  s: StatusJson,
  refreshSeconds: number = DEFAULT_REFRESH_SECONDS,
): string {
  const every = Math.max(1, Math.round(refreshSeconds));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tierd ${escapeHtml(s.version)}</title>
<noscript><meta http-equiv="refresh" content="${every}"></noscript>
<style>${STYLE}</style>
</head>
<body>
<h1>tierd ${escapeHtml(s.version)}</h1>
<p id="refresh">Refreshes every ${every} s.</p>
<main id="status">
${renderStatusFragment(s)}
</main>
<footer>Segments: <em>local</em> have broker files, <em>uploaded</em> are local and verified in the
store, <em>remote</em> are only in the store, <em>dangling</em> await cleanup of a failed copy.
The copy backlog is sealed local data not yet copied.
<a href="/metrics">metrics</a> · <a href="/v1/status">status (JSON)</a> ·
<a href="/v1/partitions">partitions (JSON)</a></footer>
<script>
(function () {
  var main = document.getElementById("status");
  var note = document.getElementById("refresh");
  var every = ${every * 1000};
  function tick() {
    fetch("/?fragment=1", { cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        main.innerHTML = html;
        note.className = "";
        note.textContent = "Refreshes every " + every / 1000 + " s.";
      })
      .catch(function (e) {
        note.className = "bad";
        note.textContent = "The agent did not answer (" + e.message + "); showing its last answer.";
      })
      .then(function () { setTimeout(tick, every); });
  }
  setTimeout(tick, every);
})();
</script>
</body>
</html>
`;
}
