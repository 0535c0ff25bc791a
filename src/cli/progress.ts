// Progress of long CLI work on stderr: N of M, bytes, rate and ETA. On a terminal one line is
// rewritten in place — also while one big item is under way — and a log line written meanwhile
// goes above it (`writeAboveProgress`), never onto it; otherwise each finished step prints its
// own line, so logs stay readable.
import { type Clock, systemClock } from "../base/clock.ts";
import { humanSize } from "../config/units.ts";

/** How far a piece of work has come. */
export interface ProgressState {
  /** Items done (segments, messages) and in all. */
  done: number;
  total: number;
  bytesDone: number;
  /** Bytes in all; omitted when not known ahead (the ETA then follows the items' rate). */
  bytesTotal?: number;
}

/** Options of a {@link Progress}. */
export interface ProgressOptions {
  clock?: Clock;
  /** Rewrite one line. @default when stderr is a terminal */
  tty?: boolean;
  /** Where text goes. @default stderr */
  write?: (text: string) => void;
  /** What the items are, after N/M (`"segments"`). @default none */
  unit?: string;
}

/** The terminal progress line drawn last and not yet ended, for log lines to go above it. */
let drawn: { text: string; write: (text: string) => void } | undefined;

/**
 * Writes `line` (a log line, without its line break) to stderr; on a terminal with a progress
 * line open, the line is cleared first and drawn again below it.
 */
export function writeAboveProgress(line: string): void {
  if (!drawn) {
    process.stderr.write(line + "\n");
    return;
  }
  drawn.write(`\r\x1b[K${line}\n${drawn.text}`);
}

/** Reports progress of one task (`restore 0/1/2`, `gen`, `run --once`). */
export class Progress {
  readonly #label: string;
  readonly #clock: Clock;
  readonly #write: (text: string) => void;
  readonly #tty: boolean;
  readonly #unit: string;
  readonly #started: number;
  #lastDraw = -Infinity;
  /** A terminal line is drawn and not yet ended. */
  #open = false;

  /**
   * @param label what is being done, first on every line
   * @param options see {@link ProgressOptions}
   */
  constructor(label: string, options: ProgressOptions = {}) {
    this.#label = label;
    this.#clock = options.clock ?? systemClock;
    this.#write = options.write ?? ((text) => void process.stderr.write(text));
    this.#tty = options.tty ?? Boolean(process.stderr.isTTY);
    this.#unit = options.unit ? ` ${options.unit}` : "";
    this.#started = this.#clock.monotonic();
  }

  /**
   * Reports a step; `item` names it on a plain line (`segment 00000000000000001000`). With
   * `partial`, the bytes of an item still under way: the terminal line moves, no plain line is
   * printed.
   */
  update(state: ProgressState, item?: string, options: { partial?: boolean } = {}): void {
    const now = this.#clock.monotonic();
    if (this.#tty) {
      if (now - this.#lastDraw < 100 && (state.done < state.total || options.partial)) return;
      this.#lastDraw = now;
      const text = `\r${this.line(state)}\x1b[K`;
      this.#write(text);
      this.#open = true;
      drawn = { text, write: this.#write };
      if (state.done >= state.total && !options.partial) this.end();
      return;
    }
    if (options.partial) return;
    this.#write(`${this.line(state)}${item ? `: ${item}` : ""}\n`);
  }

  /** Ends a terminal line still being rewritten (work that stopped short of its total). */
  end(): void {
    if (!this.#open) return;
    this.#open = false;
    drawn = undefined;
    this.#write("\n");
  }

  /** The progress line (without a line break). */
  line(s: ProgressState): string {
    const seconds = Math.max(0.001, (this.#clock.monotonic() - this.#started) / 1000);
    const rate = s.bytesDone / seconds;
    let eta = "";
    if (s.bytesTotal !== undefined) {
      const left = s.bytesTotal - s.bytesDone;
      if (rate > 0 && left > 0) eta = ` eta ${formatDuration(left / rate)}`;
    } else if (s.done > 0 && s.done < s.total) {
      eta = ` eta ${formatDuration((s.total - s.done) / (s.done / seconds))}`;
    }
    const bytes = s.bytesTotal === undefined
      ? humanSize(s.bytesDone)
      : `${humanSize(s.bytesDone)} of ${humanSize(s.bytesTotal)}`;
    return `${this.#label}: ${s.done}/${s.total}${this.#unit}, ${bytes}, ${
      humanSize(rate)
    }/s${eta}`;
  }
}

/** `"2 d 3 h"`, `"1 h 2 m"`, `"3 m 4 s"`, `"5 s"`. */
export function formatDuration(seconds: number): string {
  const s = Math.round(seconds);
  if (s >= 86400) return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
  if (s >= 60) return `${Math.floor(s / 60)} m ${s % 60} s`;
  return `${s} s`;
}
