// The one error a config load throws: every problem found, each naming its key path (or the
// file, line and column of a TOML syntax error), the value as written, and what was expected.

/** One problem in a config file. Values of secret keys are already redacted. */
export interface ConfigIssue {
  /** Dotted key path, e.g. `tiered_storage.cache.chunk_size` or `topic[1].stream`; `""` for the file. */
  readonly path: string;
  /** The value as written (TOML-quoted, secrets as `"***"`), when there is one to show. */
  readonly value?: string;
  /** What is wrong, usually "expected …" (what would have been accepted). */
  readonly message: string;
  /** 1-based line of a TOML syntax error. */
  readonly line?: number;
  /** 1-based column of a TOML syntax error. */
  readonly column?: number;
}

/** Renders one issue as the single line that goes into the error message. */
export function formatIssue(source: string, issue: ConfigIssue): string {
  if (issue.line !== undefined) {
    return `${source}:${issue.line}:${issue.column ?? 1}: ${issue.message}`;
  }
  if (issue.path === "") return issue.message;
  const shown = issue.value === undefined ? issue.path : `${issue.path} = ${issue.value}`;
  return `${shown}: ${issue.message}`;
}

/** A config file that cannot be used; `issues` lists every problem, one per message line. */
export class ConfigError extends Error {
  /** The file (or other source name) the config came from. */
  readonly source: string;
  /** Every problem found, in file order. */
  readonly issues: readonly ConfigIssue[];

  /**
   * @param source the config file path or source name
   * @param issues the problems found (at least one)
   */
  constructor(source: string, issues: readonly ConfigIssue[]) {
    const single = issues.length === 1 && issues[0].path === "";
    super(
      single ? formatIssue(source, issues[0]) : [
        `${source}: invalid config (${issues.length} problem${issues.length === 1 ? "" : "s"}):`,
        ...issues.map((i) => `  ${formatIssue(source, i)}`),
      ].join("\n"),
    );
    this.name = "ConfigError";
    this.source = source;
    this.issues = issues;
  }
}
