// The status page (`GET /`): one self-contained HTML document — no scripts, no external assets —
// listing each tiered partition with its floor and where its segments are, and why eviction
// waits where it does.
import { incarnationHex } from "../layout/partition.ts";
import type { PartitionSummary } from "../read/partitions.ts";
import { VERSION } from "../version.ts";

/** A sealed segment the tier worker found damaged (not copied, not evicted). */
export interface DamagedSegmentLine {
  /** `"{s}/{t}/{p}"`. */
  partition: string;
  /** The segment's start offset. */
  segment: bigint;
  /** `"<file> @ byte <position>: <what is wrong>"`. */
  reason: string;
  /** When it was first found, ms since the epoch. */
  since: number;
}

/** What the page shows besides the partitions. */
export interface StatusInfo {
  store: string;
  uptimeSeconds: number;
  ready: boolean;
  /** Partitions whose eviction waits: `"{s}/{t}/{p}"` and the reason in one line. */
  evictionBlocked?: readonly { partition: string; text: string }[];
  /** Damaged sealed segments, from the worker's last pass of each partition. @default none */
  damaged?: readonly DamagedSegmentLine[];
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

function formatBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}

function formatUptime(seconds: number): string {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${d > 0 ? `${d}d ` : ""}${h}h ${m}m ${s % 60}s`;
}

/** Renders the status page. Every interpolated value is escaped. */
export function renderStatusPage(
  partitions: readonly PartitionSummary[],
  info: StatusInfo,
): string {
  const rows = partitions.map((p) => {
    const cells = [
      `${p.stream}/${p.topic}/${p.partition}`,
      p.format ?? "—",
      p.incarnation === undefined ? "—" : incarnationHex(p.incarnation),
      p.generation.toString(),
      p.floor < 0n ? "—" : p.floor.toString(),
      String(p.segments.local),
      String(p.segments.uploaded),
      String(p.segments.remote),
      String(p.segments.dangling),
      formatBytes(p.localBytes),
      formatBytes(p.remoteBytes),
    ];
    return `<tr>${cells.map((c) => `<td>${escapeHtml(c)}</td>`).join("")}</tr>`;
  });
  const head = [
    "partition",
    "format",
    "incarnation",
    "generation",
    "tiered up to",
    "local",
    "uploaded",
    "remote",
    "dangling",
    "local bytes",
    "remote bytes",
  ].map((h) => `<th>${h}</th>`).join("");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tierd ${escapeHtml(VERSION)}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; }
th, td { padding: 0.25em 0.75em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.bad { color: #b00; }
</style>
</head>
<body>
<h1>tierd ${escapeHtml(VERSION)}</h1>
<p>Store: ${escapeHtml(info.store)} · Uptime: ${escapeHtml(formatUptime(info.uptimeSeconds))} · ${
    info.ready ? "ready" : '<span class="bad">not ready</span>'
  }</p>
<p>Segments: <em>local</em> have broker files, <em>uploaded</em> are local and verified in the
store, <em>remote</em> are only in the store, <em>dangling</em> await cleanup of a failed copy.</p>
${
    partitions.length === 0
      ? "<p>No tiered partitions found.</p>"
      : `<table>\n<tr>${head}</tr>\n${rows.join("\n")}\n</table>`
  }
${
    (info.evictionBlocked ?? []).length === 0
      ? ""
      : `<h2>Eviction waiting</h2>\n<ul>\n${
        info.evictionBlocked!.map((b) =>
          `<li class="bad">${escapeHtml(b.partition)}: ${escapeHtml(b.text)}</li>`
        ).join("\n")
      }\n</ul>\n`
  }${damagedSection(info.damaged ?? [])}
<p><a href="/metrics">metrics</a> · <a href="/v1/partitions">partitions (JSON)</a></p>
</body>
</html>
`;
}

/** The damaged segments, or nothing when there are none. */
function damagedSection(damaged: readonly DamagedSegmentLine[]): string {
  if (damaged.length === 0) return "";
  const rows = damaged.map((d) =>
    `<li><strong>${escapeHtml(d.partition)} segment ${escapeHtml(d.segment.toString())}</strong>` +
    ` (since ${escapeHtml(new Date(d.since).toISOString())}): ${escapeHtml(d.reason)}</li>`
  );
  return `<h2 class="bad">Damaged segments</h2>
<p>These sealed segments failed verification: they are not copied or evicted, and the segments
after them wait, until the file is repaired or replaced.</p>
<ul>
${rows.join("\n")}
</ul>`;
}
