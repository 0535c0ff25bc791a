// A failure met by a pass's phases or a housekeeping job, as data: what kind of work failed, on
// what, why, on which segment, and whether the store was at fault. `describeProblem` words it as
// operators read it (logs, the status page, `/v1/status`, `tierd run --once`'s exit line).
import { isRetryable } from "../../providers/types.ts";

/** What kind of work failed. */
export type ProblemKind =
  /** A segment's upload (`what`: its object key). */
  | "copy"
  /** A sealed segment's files could not be read for its copy (`what`: the `.log`'s path). */
  | "segment_unreadable"
  /** A sealed segment failed its checks: not copied (`what`: `segment {n}`). */
  | "segment_damaged"
  /** A failed copy's cleanup (`what`: `cleanup of segment {n}`). */
  | "cleanup"
  /** A copied segment's local file changed size after its copy: not evicted. */
  | "segment_changed"
  /** The partition's segment format is not known yet: nothing evicted. */
  | "format_unknown"
  /** An eviction: its admission or removal (`what`: the evictor's action), or a copy's proof. */
  | "evict"
  /** A remote deletion by total retention. */
  | "retention_delete"
  /** A partition's pass failed as a whole. */
  | "partition"
  /** A partition's state could not be opened. */
  | "partition_open"
  /** A housekeeping job (manifest upload, verify pass, orphan or multipart sweep). */
  | "housekeeping";

/** One failure, for the pass report, the status and the exit line. */
export interface Problem {
  kind: ProblemKind;
  /** What failed, in words: `cleanup of segment 42`, an object key, a file's path. */
  what: string;
  /** Why: the error's message, "" when there is none. */
  detail: string;
  /** The segment (its start offset) the work was on, when it was on one. */
  segment?: bigint;
  /** A store fault worth retrying (transport, throttling: `isRetryable`). */
  storeFault: boolean;
}

/** Where a failure happened: the kind of work, what it was on, its segment. */
export type FailureSite = Pick<Problem, "kind" | "what" | "segment">;

/** Work on one segment that fails in the words `{work} of segment {n}`, by kind. */
const SEGMENT_WORK = {
  cleanup: "cleanup",
  evict: "eviction",
  retention_delete: "retention delete",
} as const satisfies Partial<Record<ProblemKind, string>>;

/**
 * The site of work on one segment: `onSegment("cleanup", 42n)` is `cleanup of segment 42`.
 * @param kind the work
 * @param segment its start offset
 */
export function onSegment(kind: keyof typeof SEGMENT_WORK, segment: bigint): FailureSite {
  return { kind, what: `${SEGMENT_WORK[kind]} of segment ${segment}`, segment };
}

/** What went wrong in a phase or a job, in the order it happened. */
export interface Problems {
  problems: Problem[];
}

/** No problems (yet). */
export function noProblems(): Problems {
  return { problems: [] };
}

/**
 * The problem of a caught failure.
 * @param site where it happened
 * @param err what was thrown: its message is the detail, and `isRetryable` says a store fault
 * @returns the problem
 */
export function problemOf(site: FailureSite, err: unknown): Problem {
  return {
    kind: site.kind,
    what: site.what,
    detail: messageOf(err),
    ...(site.segment !== undefined && { segment: site.segment }),
    storeFault: isRetryable(err),
  };
}

/**
 * Notes a caught failure in `p` (see {@link problemOf}).
 * @returns the problem noted
 */
export function noteFailure(p: Problems, site: FailureSite, err: unknown): Problem {
  const problem = problemOf(site, err);
  p.problems.push(problem);
  return problem;
}

/**
 * A problem in the words operators have always read: `{what}: {detail}`; a damaged segment as
 * `{detail} (segment {n} is damaged: not copied)`; a partition whose state cannot be opened as
 * `partition {label}: cannot open its state: {detail}`.
 */
export function describeProblem(p: Problem): string {
  switch (p.kind) {
    case "segment_damaged":
      return `${p.detail} (${p.what} is damaged: not copied)`;
    case "partition_open":
      return `${p.what}: cannot open its state: ${p.detail}`;
    default:
      return `${p.what}: ${p.detail}`;
  }
}

/** The problems whose words differ: the first of each, in order (a phase run twice says it once). */
export function uniqueProblems(problems: readonly Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const text = describeProblem(p);
    return !seen.has(text) && seen.add(text) !== undefined;
  });
}

/** The message of what was thrown ("" without one). */
function messageOf(err: unknown): string {
  const message = (err as { message?: unknown } | null | undefined)?.message;
  return message === undefined ? "" : String(message);
}
