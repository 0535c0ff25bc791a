// What the status page, `GET /v1/status` and `GET /v1/partitions` say about the agent: the
// partition summaries of the read path joined with what the running agent knows (its passes,
// copy rates, the store's state, the cache, housekeeping), and each partition's problems in
// words — stalled, blocked, damaged, failed — for the page to show in red. Pure: the agent's
// side comes in through {@link AgentView}, which `runtime/agent_view.ts` implements.
import { incarnationHex } from "../layout/partition.ts";
import type { PartitionSummary } from "../read/partitions.ts";
import { describeProblem, type Problem as PassProblem } from "../tier/problem.ts";

/** What the running agent knows about one partition's work. */
export interface PartitionWork {
  /** The first pass since start has been through this partition. */
  firstPassDone: boolean;
  /** Segments copied (or adopted) since start, and their bytes. */
  copied: { segments: number; bytes: number };
  /** Copy rate over the last minute. */
  bytesPerSecond: number;
  /** The problems of its last pass. */
  problems: readonly PassProblem[];
  /** Its last pass met store faults worth retrying (transport, throttling). */
  storeUnreachable: boolean;
  /** Copies still to do after its last pass. */
  pending: number;
  /**
   * Its copies failing on store faults: since when (ms since the epoch, the first failure of
   * the run), how many faults, the latest; absent while its last pass met none.
   */
  uploadFault?: { since: number; failures: number; latest: PassProblem };
  /** Why its eviction or copy is held back (a consumer's offset, …), one sentence each. */
  blocked: readonly string[];
}

/** The agent's passes. */
export interface PassesView {
  firstPass: {
    done: boolean;
    /** Partitions the first pass has finished, of those open. */
    partitionsDone: number;
    partitionsTotal: number;
  };
  /** The last finished pass; times in ms since the epoch. */
  last?: {
    startedAt: number;
    finishedAt: number;
    problems: readonly PassProblem[];
    copied: number;
    failed: number;
    evicted: number;
  };
}

/** The store as the agent sees it. */
export interface StoreView {
  /** `tierd_upload_stalled`: work waits on a store that does not answer. */
  stalled: boolean;
  /** When the stall began (ms since the epoch), while there is one. */
  stalledSince?: number;
  /** Requests the store answered with throttling since start (`tierd_store_throttled_total`). */
  throttledRequests: number;
  /** Requests sent to the store since start, and their estimated cost at the price table's. */
  requests?: { count: number; cost: number; currency: string };
}

/** The chunk cache's use. */
export interface CacheView {
  bytes: number;
  budgetBytes: number;
  objects: number;
  maxObjects: number;
  hits: number;
  misses: number;
}

/** Housekeeping, as `Housekeeper.status()` reports it. */
export interface HousekeepingView {
  lastRun?: number;
  lastJobs: readonly {
    job: string;
    complete: boolean;
    counts: Readonly<Record<string, number>>;
    problems: readonly PassProblem[];
  }[];
  requestsUsed: number;
  verifyInProgress: boolean;
  lastVerifyCompleted?: number;
  unrepairable: number;
}

/** The running agent's side of the status (absent for a bare read path). */
export interface AgentView {
  /** By `"{s}/{t}/{p}"`; undefined for a partition the agent has not opened. */
  partition(label: string): PartitionWork | undefined;
  passes(): PassesView;
  store(): StoreView;
  /** Copy rate of all partitions over the last minute. */
  bytesPerSecond(): number;
  cache(): CacheView | undefined;
  housekeeping(): HousekeepingView | undefined;
}

/** One problem of a partition or topic, shown in red (`bad`) or amber (`warn`). */
export interface Problem {
  kind: "stalled" | "blocked" | "damaged" | "failed" | "error" | "rebuilt" | "hole" | "opening";
  severity: "bad" | "warn";
  reason: string;
}

/** One partition in `GET /v1/partitions` and `/v1/status`; 64-bit values are decimal strings. */
export interface PartitionJson {
  stream: number;
  topic: number;
  partition: number;
  format: string | null;
  /** 16 lowercase hex digits, or null before the partition was first recorded. */
  incarnation: string | null;
  generation: string;
  /** null before the first copy. */
  tiered_up_to_offset: string | null;
  segments: { local: number; uploaded: number; remote: number; dangling: number };
  local_bytes: string;
  remote_bytes: string;
  /** `ok`, `rebuilt` (from the bucket) or `failed` (state cannot be opened); null when unknown. */
  state: string | null;
  state_detail: string | null;
  /** Sealed local segments not yet copied (the copy backlog), and their bytes. */
  copy_lag: { segments: number; bytes: string };
  /**
   * Remote copies tierd has decided to delete whose objects may still be in the store, their
   * bytes, and when the oldest deletion was due (ms since the epoch; null when none is pending).
   */
  remote_delete_lag: { segments: number; bytes: string; oldest_due_at: number | null };
  /** Copied since the agent started; null without the agent. */
  copied: { segments: number; bytes: string } | null;
  /** Bytes per second over the last minute; null without the agent. */
  copy_rate_bytes_per_second: number | null;
  /** Seconds until the backlog is copied at that rate: 0 without a backlog, null if unknown. */
  eta_seconds: number | null;
  /** The first pass since start has been through it; null without the agent. */
  first_pass_done: boolean | null;
  problems: Problem[];
}

/** A topic: its partitions summed, and their problems. */
export interface TopicJson {
  stream: number;
  topic: number;
  partitions: number;
  /** The worst partition state: `failed`, `rebuilt` or `ok`; null when unknown. */
  state: string | null;
  local_bytes: string;
  remote_bytes: string;
  copy_lag: { segments: number; bytes: string };
  copy_rate_bytes_per_second: number | null;
  eta_seconds: number | null;
  /** The lowest floor of its partitions; null while one has none. */
  tiered_up_to_offset: string | null;
  /** Each problem of its partitions, prefixed with the partition. */
  problems: Problem[];
}

/** Everything `GET /v1/status` answers, and the status page shows. */
export interface StatusJson {
  version: string;
  store: string;
  /** ms since the epoch. */
  now: number;
  uptime_seconds: number;
  ready: boolean;
  stalled: {
    stalled: boolean;
    /** When the stall began, ms since the epoch; null while uploads flow. */
    since: number | null;
    /** What keeps uploads stalled, in words (see {@link stallCause}); null while they flow. */
    reason: string | null;
    /**
     * The partition whose copies have failed longest on store faults: since when (ms since the
     * epoch), how many faults, the latest; null while uploads flow or no copy has failed yet.
     */
    cause: { partition: string; since: number; failures: number; error: string } | null;
    throttled_requests: number;
  } | null;
  /**
   * Store requests since start and their estimated cost (`[tiered_storage.request_prices]`);
   * `per_day` extrapolates it from the uptime, null in the first minute.
   */
  store_requests: {
    requests: number;
    estimated_cost: number;
    currency: string;
    per_day: number | null;
  } | null;
  first_pass: {
    done: boolean;
    partitions_done: number;
    partitions_total: number;
    segments_copied: number;
    /** Copied plus still to copy. */
    segments_backlog: number;
    bytes_copied: string;
    bytes_backlog: string;
  } | null;
  last_pass: {
    started_at: number;
    finished_at: number;
    duration_ms: number;
    copied: number;
    failed: number;
    evicted: number;
    errors: string[];
  } | null;
  copy: {
    lag_segments: number;
    lag_bytes: string;
    rate_bytes_per_second: number | null;
    eta_seconds: number | null;
  };
  cache: {
    bytes: number;
    budget_bytes: number;
    objects: number;
    max_objects: number;
    hits: number;
    misses: number;
    hit_ratio: number | null;
  } | null;
  housekeeping: {
    /** ms since the epoch, null before the first run. */
    last_run: number | null;
    last_jobs: {
      job: string;
      complete: boolean;
      counts: Record<string, number>;
      errors: string[];
    }[];
    requests_used: number;
    verify_in_progress: boolean;
    last_verify_completed: number | null;
    unrepairable: number;
  } | null;
  topics: TopicJson[];
  partitions: PartitionJson[];
}

/** What the snapshot is built from besides the partitions. */
export interface StatusInputs {
  version: string;
  store: string;
  now: number;
  uptimeSeconds: number;
  ready: boolean;
  agent?: AgentView;
}

/** At most this many errors of one partition are listed as problems. */
const MAX_ERRORS = 3;

/** Words that mark an error as damage to a segment or a copy rather than a passing fault. */
const DAMAGE = /corrupt|checksum|damaged|mismatch|differs|changed|invalid|truncated|format/i;

/** Kinds of pass problem that are damage whatever their words. */
const DAMAGE_KINDS: ReadonlySet<PassProblem["kind"]> = new Set([
  "segment_damaged",
  "segment_changed",
]);

function etaSeconds(bytes: number, rate: number | null): number | null {
  if (bytes <= 0) return 0;
  if (rate === null || !(rate > 0)) return null;
  return Math.round(bytes / rate);
}

/** The problems of one partition, worst first. */
export function partitionProblems(p: PartitionSummary, work?: PartitionWork): Problem[] {
  const out: Problem[] = [];
  if (p.health?.state === "failed") {
    out.push({
      kind: "failed",
      severity: "bad",
      reason: `state cannot be opened: ${p.health.detail ?? "unknown error"}`,
    });
  }
  if (p.health?.state === "opening") {
    out.push({
      kind: "opening",
      severity: "warn",
      reason: `${p.health.detail ?? "opening"}; its reads answer 503 (retry) until it is open`,
    });
  }
  for (const h of p.holes) {
    out.push({
      kind: "hole",
      severity: "bad",
      reason: `the bucket lacks offsets ${h.from}..${h.to ?? "?"} (${h.reason}): reads answer ` +
        "them as a gap and nothing after them is evicted. Repair the object and run tierd " +
        "restore again, or record the loss with tierd restore --accept-holes",
    });
  }
  if (work?.storeUnreachable && (work.pending > 0 || p.copyLag.segments > 0)) {
    // What holds its copies back, when that is a store fault; else its pass's first error.
    const cause = work.uploadFault?.latest ?? work.problems[0];
    out.push({
      kind: "stalled",
      severity: "bad",
      reason: `store unreachable${cause ? `: ${describeProblem(cause)}` : ""}`,
    });
  }
  for (const b of work?.blocked ?? []) out.push({ kind: "blocked", severity: "bad", reason: b });
  if (work && !work.storeUnreachable) {
    for (const e of work.problems.slice(0, MAX_ERRORS)) {
      const reason = describeProblem(e);
      const damaged = DAMAGE_KINDS.has(e.kind) || DAMAGE.test(reason);
      out.push({ kind: damaged ? "damaged" : "error", severity: "bad", reason });
    }
    if (work.problems.length > MAX_ERRORS) {
      out.push({
        kind: "error",
        severity: "bad",
        reason: `and ${work.problems.length - MAX_ERRORS} more error(s) in the last pass`,
      });
    }
  }
  if (p.health?.state === "rebuilt") {
    out.push({ kind: "rebuilt", severity: "warn", reason: p.health.detail ?? "rebuilt" });
  }
  return out;
}

/** The partition work that keeps uploads stalled (see {@link stallCause}). */
export interface StallCause {
  /** `"{s}/{t}/{p}"`. */
  partition: string;
  since: number;
  failures: number;
  latest: PassProblem;
}

/**
 * What the stall banner and `/v1/status` name as the stall's cause: the most recent failure of
 * the oldest still-failing work. Not simply whichever operation failed last: during an outage
 * every kind of call fails in turn — a copy's PUT, the ownership check's GET of `owner.json`
 * before it, a failed copy's cleanup, a retention DELETE — so the last failure changes with each
 * refresh and names whatever happened to run, often work that does not hold uploads back at all.
 * What keeps uploads stalled is copy work that cannot finish; of that, the partition whose copy
 * chain has failed the longest without moving is the one the stall began with and the last to
 * clear, and its most recent failure says what the store answers now. Ties (partitions that
 * began failing in the same pass) go to the one with more failures, then to the first listed,
 * so the banner stays put from one refresh to the next.
 *
 * @param works each partition's label and work, in the order the status lists them
 * @returns the cause, or undefined when no partition's copies are failing on store faults
 */
export function stallCause(
  works: readonly { label: string; work?: PartitionWork }[],
): StallCause | undefined {
  let best: StallCause | undefined;
  for (const { label, work } of works) {
    const f = work?.uploadFault;
    if (!f) continue;
    if (
      !best || f.since < best.since || (f.since === best.since && f.failures > best.failures)
    ) {
      best = { partition: label, since: f.since, failures: f.failures, latest: f.latest };
    }
  }
  return best;
}

/** One partition's JSON. */
export function partitionJson(p: PartitionSummary, agent?: AgentView): PartitionJson {
  const label = `${p.stream}/${p.topic}/${p.partition}`;
  const work = agent?.partition(label);
  const rate = agent ? (work?.bytesPerSecond ?? 0) : null;
  return {
    stream: p.stream,
    topic: p.topic,
    partition: p.partition,
    format: p.format ?? null,
    incarnation: p.incarnation === undefined ? null : incarnationHex(p.incarnation),
    generation: p.generation.toString(),
    tiered_up_to_offset: p.floor < 0n ? null : p.floor.toString(),
    segments: { ...p.segments },
    local_bytes: String(p.localBytes),
    remote_bytes: String(p.remoteBytes),
    state: p.health?.state ?? null,
    state_detail: p.health?.detail ?? null,
    copy_lag: { segments: p.copyLag.segments, bytes: String(p.copyLag.bytes) },
    remote_delete_lag: {
      segments: p.deleteLag.segments,
      bytes: String(p.deleteLag.bytes),
      oldest_due_at: p.deleteLag.oldestDueAt ?? null,
    },
    copied: agent
      ? { segments: work?.copied.segments ?? 0, bytes: String(work?.copied.bytes ?? 0) }
      : null,
    copy_rate_bytes_per_second: rate,
    eta_seconds: etaSeconds(p.copyLag.bytes, rate),
    first_pass_done: agent ? (work?.firstPassDone ?? false) : null,
    problems: partitionProblems(p, work),
  };
}

const STATE_RANK: Record<string, number> = { ok: 0, rebuilt: 1, opening: 2, failed: 3 };

function topicsOf(partitions: readonly PartitionJson[], agent?: AgentView): TopicJson[] {
  const topics = new Map<string, TopicJson>();
  for (const p of partitions) {
    const key = `${p.stream}/${p.topic}`;
    let t = topics.get(key);
    if (!t) {
      t = {
        stream: p.stream,
        topic: p.topic,
        partitions: 0,
        state: p.state,
        local_bytes: "0",
        remote_bytes: "0",
        copy_lag: { segments: 0, bytes: "0" },
        copy_rate_bytes_per_second: agent ? 0 : null,
        eta_seconds: null,
        tiered_up_to_offset: p.tiered_up_to_offset,
        problems: [],
      };
      topics.set(key, t);
    }
    t.partitions++;
    if (p.state !== null && (STATE_RANK[p.state] ?? 0) > (STATE_RANK[t.state ?? "ok"] ?? 0)) {
      t.state = p.state;
    }
    t.local_bytes = String(Number(t.local_bytes) + Number(p.local_bytes));
    t.remote_bytes = String(Number(t.remote_bytes) + Number(p.remote_bytes));
    t.copy_lag = {
      segments: t.copy_lag.segments + p.copy_lag.segments,
      bytes: String(Number(t.copy_lag.bytes) + Number(p.copy_lag.bytes)),
    };
    if (t.copy_rate_bytes_per_second !== null) {
      t.copy_rate_bytes_per_second += p.copy_rate_bytes_per_second ?? 0;
    }
    const floor = p.tiered_up_to_offset;
    if (floor === null || t.tiered_up_to_offset === null) t.tiered_up_to_offset = null;
    else if (BigInt(floor) < BigInt(t.tiered_up_to_offset)) t.tiered_up_to_offset = floor;
    for (const problem of p.problems) {
      t.problems.push({ ...problem, reason: `partition ${p.partition}: ${problem.reason}` });
    }
  }
  for (const t of topics.values()) {
    t.eta_seconds = etaSeconds(Number(t.copy_lag.bytes), t.copy_rate_bytes_per_second);
  }
  return [...topics.values()];
}

/** Builds the whole status from the partition summaries and the agent's view. */
export function statusJson(summaries: readonly PartitionSummary[], i: StatusInputs): StatusJson {
  const agent = i.agent;
  const partitions = summaries.map((p) => partitionJson(p, agent));
  const lagSegments = summaries.reduce((n, p) => n + p.copyLag.segments, 0);
  const lagBytes = summaries.reduce((n, p) => n + p.copyLag.bytes, 0);
  const rate = agent ? agent.bytesPerSecond() : null;
  let stalled: StatusJson["stalled"] = null;
  let storeRequests: StatusJson["store_requests"] = null;
  let firstPass: StatusJson["first_pass"] = null;
  let lastPass: StatusJson["last_pass"] = null;
  let cache: StatusJson["cache"] = null;
  if (agent) {
    const store = agent.store();
    const passes = agent.passes();
    const cause = store.stalled
      ? stallCause(summaries.map((p) => {
        const label = `${p.stream}/${p.topic}/${p.partition}`;
        return { label, work: agent.partition(label) };
      }))
      : undefined;
    // Without a partition whose copies failed yet (the first pass still retrying, the store
    // down at start), a partition's stalled problem or the stall alone.
    const reason = cause
      ? `store unreachable: partition ${cause.partition}: ${describeProblem(cause.latest)}`
      : partitions.flatMap((p) => p.problems).find((q) => q.kind === "stalled")?.reason ??
        "store unreachable";
    stalled = {
      stalled: store.stalled,
      since: store.stalled ? store.stalledSince ?? null : null,
      reason: store.stalled ? reason : null,
      cause: cause
        ? {
          partition: cause.partition,
          since: cause.since,
          failures: cause.failures,
          error: describeProblem(cause.latest),
        }
        : null,
      throttled_requests: store.throttledRequests,
    };
    if (store.requests) {
      const { count, cost, currency } = store.requests;
      storeRequests = {
        requests: count,
        estimated_cost: cost,
        currency,
        per_day: i.uptimeSeconds >= 60 ? cost / i.uptimeSeconds * 86_400 : null,
      };
    }
    const copied = partitions.reduce((n, p) => n + (p.copied?.segments ?? 0), 0);
    const copiedBytes = partitions.reduce((n, p) => n + Number(p.copied?.bytes ?? 0), 0);
    firstPass = {
      done: passes.firstPass.done,
      partitions_done: passes.firstPass.partitionsDone,
      partitions_total: passes.firstPass.partitionsTotal,
      segments_copied: copied,
      segments_backlog: copied + lagSegments,
      bytes_copied: String(copiedBytes),
      bytes_backlog: String(copiedBytes + lagBytes),
    };
    const last = passes.last;
    if (last) {
      lastPass = {
        started_at: last.startedAt,
        finished_at: last.finishedAt,
        duration_ms: last.finishedAt - last.startedAt,
        copied: last.copied,
        failed: last.failed,
        evicted: last.evicted,
        errors: last.problems.map(describeProblem),
      };
    }
    const c = agent.cache();
    if (c) {
      const reads = c.hits + c.misses;
      cache = {
        bytes: c.bytes,
        budget_bytes: c.budgetBytes,
        objects: c.objects,
        max_objects: c.maxObjects,
        hits: c.hits,
        misses: c.misses,
        hit_ratio: reads === 0 ? null : c.hits / reads,
      };
    }
  }
  return {
    version: i.version,
    store: i.store,
    now: i.now,
    uptime_seconds: i.uptimeSeconds,
    ready: i.ready,
    stalled,
    store_requests: storeRequests,
    first_pass: firstPass,
    last_pass: lastPass,
    copy: {
      lag_segments: lagSegments,
      lag_bytes: String(lagBytes),
      rate_bytes_per_second: rate,
      eta_seconds: etaSeconds(lagBytes, rate),
    },
    cache,
    housekeeping: housekeepingJson(agent?.housekeeping()),
    topics: topicsOf(partitions, agent),
    partitions,
  };
}

/** Housekeeping's view in the status JSON's words (snake_case, null for "not yet"). */
function housekeepingJson(h: HousekeepingView | undefined): StatusJson["housekeeping"] {
  if (!h) return null;
  return {
    last_run: h.lastRun ?? null,
    last_jobs: h.lastJobs.map((j) => ({
      job: j.job,
      complete: j.complete,
      counts: { ...j.counts },
      errors: j.problems.map(describeProblem),
    })),
    requests_used: h.requestsUsed,
    verify_in_progress: h.verifyInProgress,
    last_verify_completed: h.lastVerifyCompleted ?? null,
    unrepairable: h.unrepairable,
  };
}
