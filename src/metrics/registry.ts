// A small Prometheus registry: counters, gauges and histograms with typed label sets, rendered
// in the text exposition format 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/).

/** Values of a metric's labels, one per label name. Numbers and bigints are written in decimal. */
export type LabelValues<L extends string> = { readonly [K in L]: string | number | bigint };

/** The leading arguments of a call on a metric: none for a label-less metric, else its labels. */
type LabelArgs<L extends string, Rest extends unknown[]> = [L] extends [never]
  ? [labels?: LabelValues<never>, ...Rest]
  : [labels: LabelValues<L>, ...Rest];

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** The upper bounds Prometheus client libraries use by default, in seconds. */
export const DEFAULT_BUCKETS: readonly number[] = [
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
];

/** Formats a sample value as Prometheus expects (Go float syntax, `+Inf`, `-Inf`, `NaN`). */
function formatValue(v: number): string {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "+Inf";
  if (v === -Infinity) return "-Inf";
  return String(v);
}

/** Escapes a label value: backslash, double quote and line feed. */
export function escapeLabelValue(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** Escapes HELP text: backslash and line feed. */
function escapeHelp(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** One labelled time series: its label values in label-name order, and its state. */
interface Series<S> {
  values: string[];
  state: S;
}

/** What every metric type shares: name, help, label names and the series keyed by label values. */
abstract class Metric<L extends string, S> {
  readonly #series = new Map<string, Series<S>>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
  ) {}

  abstract readonly type: "counter" | "gauge" | "histogram";

  /** A new series' state. */
  protected abstract initial(): S;

  /** The sample lines of one series. */
  protected abstract lines(series: Series<S>): string[];

  /** The series for `labels`, created on first use. */
  protected series(labels: object | undefined): Series<S> {
    const values = this.#labelValues(labels);
    const key = values.join("\u0000");
    let s = this.#series.get(key);
    if (!s) {
      s = { values, state: this.initial() };
      this.#series.set(key, s);
    }
    return s;
  }

  /** The existing series for `labels`, if any. */
  protected find(labels: object | undefined): Series<S> | undefined {
    return this.#series.get(this.#labelValues(labels).join("\u0000"));
  }

  #labelValues(labels: object | undefined): string[] {
    const given = (labels ?? {}) as Record<string, string | number | bigint | undefined>;
    for (const k of Object.keys(given)) {
      if (!(this.labelNames as readonly string[]).includes(k)) {
        throw new RangeError(`metric ${this.name} has no label ${JSON.stringify(k)}`);
      }
    }
    return this.labelNames.map((n) => {
      const v = given[n];
      if (v === undefined) throw new RangeError(`metric ${this.name}: label ${n} is missing`);
      return String(v);
    });
  }

  /**
   * Creates the series of `labels` at its zero value without counting anything, so a scrape
   * shows it before its first event (a `rate()` then starts from 0, not from nothing).
   * @throws {RangeError} for wrong labels
   */
  init(labels: LabelValues<L>): void {
    this.series(labels);
  }

  /** Forgets every series (for gauges recomputed from scratch on each scrape). */
  reset(): void {
    this.#series.clear();
  }

  /** Renders `# HELP`, `# TYPE` and every sample. */
  render(): string {
    const out = [
      `# HELP ${this.name} ${escapeHelp(this.help)}`,
      `# TYPE ${this.name} ${this.type}`,
    ];
    if (this.#series.size === 0 && this.labelNames.length === 0) this.series(undefined);
    for (const s of this.#series.values()) out.push(...this.lines(s));
    return out.join("\n") + "\n";
  }

  /** `{a="x",b="y"}` for the series' labels plus `extra`, or "" when there are none. */
  protected labelText(values: string[], extra?: [string, string]): string {
    const pairs = this.labelNames.map((n, i) => `${n}="${escapeLabelValue(values[i])}"`);
    if (extra) pairs.push(`${extra[0]}="${escapeLabelValue(extra[1])}"`);
    return pairs.length === 0 ? "" : `{${pairs.join(",")}}`;
  }
}

/** A monotonically increasing count. */
export class Counter<L extends string = never> extends Metric<L, { value: number }> {
  readonly type = "counter";

  protected initial() {
    return { value: 0 };
  }

  protected lines(s: Series<{ value: number }>): string[] {
    return [`${this.name}${this.labelText(s.values)} ${formatValue(s.state.value)}`];
  }

  /**
   * Adds `n` (default 1) to the series of `labels`.
   * @throws {RangeError} for a negative or non-finite `n`, or wrong labels
   */
  inc(...[labels, n = 1]: LabelArgs<L, [n?: number]>): void {
    if (!Number.isFinite(n) || n < 0) {
      throw new RangeError(`counter ${this.name} cannot increase by ${n}`);
    }
    this.series(labels).state.value += n;
  }

  /** The current value of the series of `labels` (0 when it was never touched). */
  value(...[labels]: LabelArgs<L, []>): number {
    return this.find(labels)?.state.value ?? 0;
  }
}

/** A value that goes up and down. */
export class Gauge<L extends string = never> extends Metric<L, { value: number }> {
  readonly type = "gauge";

  protected initial() {
    return { value: 0 };
  }

  protected lines(s: Series<{ value: number }>): string[] {
    return [`${this.name}${this.labelText(s.values)} ${formatValue(s.state.value)}`];
  }

  /** Sets the series of `labels` to `v`. */
  set(...[labels, v]: LabelArgs<L, [v: number]>): void {
    this.series(labels).state.value = v;
  }

  /** Adds `n` (default 1; may be negative). */
  inc(...[labels, n = 1]: LabelArgs<L, [n?: number]>): void {
    this.series(labels).state.value += n;
  }

  /** Subtracts `n` (default 1). */
  dec(...[labels, n = 1]: LabelArgs<L, [n?: number]>): void {
    this.series(labels).state.value -= n;
  }

  /** The current value of the series of `labels` (0 when it was never set). */
  value(...[labels]: LabelArgs<L, []>): number {
    return this.find(labels)?.state.value ?? 0;
  }
}

interface HistogramState {
  /** Non-cumulative counts per bucket; the last slot is `+Inf`. */
  counts: number[];
  sum: number;
  count: number;
}

/** Observations counted into cumulative buckets, with their sum and count. */
export class Histogram<L extends string = never> extends Metric<L, HistogramState> {
  readonly type = "histogram";
  readonly buckets: readonly number[];

  /**
   * @param buckets finite upper bounds, strictly increasing; `+Inf` is implicit
   * @throws {RangeError} for unsorted, duplicate or non-finite bounds, or a label named `le`
   */
  constructor(name: string, help: string, labelNames: readonly L[], buckets: readonly number[]) {
    super(name, help, labelNames);
    if ((labelNames as readonly string[]).includes("le")) {
      throw new RangeError(`histogram ${name} cannot have a label named "le"`);
    }
    for (let i = 0; i < buckets.length; i++) {
      if (!Number.isFinite(buckets[i]) || (i > 0 && buckets[i] <= buckets[i - 1])) {
        throw new RangeError(`histogram ${name}: buckets must be finite and strictly increasing`);
      }
    }
    this.buckets = [...buckets];
  }

  protected initial(): HistogramState {
    return { counts: new Array(this.buckets.length + 1).fill(0), sum: 0, count: 0 };
  }

  protected lines(s: Series<HistogramState>): string[] {
    const out: string[] = [];
    let cumulative = 0;
    this.buckets.forEach((b, i) => {
      cumulative += s.state.counts[i];
      out.push(
        `${this.name}_bucket${this.labelText(s.values, ["le", formatValue(b)])} ${cumulative}`,
      );
    });
    cumulative += s.state.counts[this.buckets.length];
    out.push(`${this.name}_bucket${this.labelText(s.values, ["le", "+Inf"])} ${cumulative}`);
    out.push(`${this.name}_sum${this.labelText(s.values)} ${formatValue(s.state.sum)}`);
    out.push(`${this.name}_count${this.labelText(s.values)} ${s.state.count}`);
    return out;
  }

  /** Records one observation `v` in the series of `labels`. */
  observe(...[labels, v]: LabelArgs<L, [v: number]>): void {
    const s = this.series(labels).state;
    let i = this.buckets.findIndex((b) => v <= b);
    if (i < 0) i = this.buckets.length;
    s.counts[i]++;
    s.sum += v;
    s.count++;
  }

  /** Count and sum of the series of `labels`. */
  snapshot(...[labels]: LabelArgs<L, []>): { count: number; sum: number } {
    const s = this.find(labels)?.state;
    return { count: s?.count ?? 0, sum: s?.sum ?? 0 };
  }
}

/**
 * A set of metrics rendered together.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 *
 * const registry = new Registry();
 * const uploads = registry.counter("tierd_uploads_total", "Segment uploads.", ["outcome"]);
 * uploads.inc({ outcome: "ok" });
 * assert.match(registry.render(), /^tierd_uploads_total\{outcome="ok"\} 1$/m);
 * ```
 */
export class Registry {
  readonly #metrics = new Map<string, Metric<string, unknown>>();
  readonly #collectors: (() => void)[] = [];

  /**
   * Registers a counter.
   * @throws {RangeError} for an invalid or already registered name, or invalid label names
   */
  counter<L extends string = never>(
    name: string,
    help: string,
    labelNames: readonly L[] = [],
  ): Counter<L> {
    return this.#add(new Counter<L>(name, help, labelNames));
  }

  /** Registers a gauge (see {@link counter} for errors). */
  gauge<L extends string = never>(
    name: string,
    help: string,
    labelNames: readonly L[] = [],
  ): Gauge<L> {
    return this.#add(new Gauge<L>(name, help, labelNames));
  }

  /**
   * Registers a histogram.
   * @param buckets finite upper bounds, strictly increasing @default DEFAULT_BUCKETS
   */
  histogram<L extends string = never>(
    name: string,
    help: string,
    labelNames: readonly L[] = [],
    buckets: readonly number[] = DEFAULT_BUCKETS,
  ): Histogram<L> {
    return this.#add(new Histogram<L>(name, help, labelNames, buckets));
  }

  /** Runs `fn` at the start of every {@link render}, to refresh gauges computed on demand. */
  onCollect(fn: () => void): void {
    this.#collectors.push(fn);
  }

  /** Every metric in the text exposition format, in registration order. */
  render(): string {
    for (const fn of this.#collectors) fn();
    return [...this.#metrics.values()].map((m) => m.render()).join("");
  }

  #add<M extends Metric<string, unknown>>(metric: M): M {
    if (!METRIC_NAME.test(metric.name)) {
      throw new RangeError(`invalid metric name ${JSON.stringify(metric.name)}`);
    }
    if (this.#metrics.has(metric.name)) {
      throw new RangeError(`metric ${metric.name} is already registered`);
    }
    const seen = new Set<string>();
    for (const l of metric.labelNames) {
      if (!LABEL_NAME.test(l) || l.startsWith("__") || seen.has(l)) {
        throw new RangeError(`metric ${metric.name}: invalid label name ${JSON.stringify(l)}`);
      }
      seen.add(l);
    }
    this.#metrics.set(metric.name, metric);
    return metric;
  }
}
