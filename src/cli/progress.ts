// Progress of long CLI work on stderr: N of M, bytes, rate and ETA. On a terminal one line is
// rewritten in place; otherwise each step prints its own line, so logs stay readable.
import { type Clock, systemClock } from "../../providers/clock.ts";
import { humanSize } from "../config/units.ts";

/** How far a piece of work has come. */
export interface ProgressState {
  /** Items done (segments, say) and in all. */
  done: number;
  total: number;
  bytesDone: number;
  bytesTotal: number;
}

/** Reports progress of one task (`restore 0/1/2`, `gen`). */
export class Progress {
  readonly #label: string;
  readonly #clock: Clock;
  readonly #write: (text: string) => void;
  readonly #tty: boolean;
  readonly #started: number;
  #lastDraw = -Infinity;

  /**
   * @param label what is being done, first on every line
   * @param options.tty rewrite one line (default: when stderr is a terminal)
   * @param options.write where text goes @default stderr
   */
  constructor(
    label: string,
    options: { clock?: Clock; tty?: boolean; write?: (text: string) => void } = {},
  ) {
    this.#label = label;
    this.#clock = options.clock ?? systemClock;
    this.#write = options.write ?? ((text) => void process.stderr.write(text));
    this.#tty = options.tty ?? Boolean(process.stderr.isTTY);
    this.#started = this.#clock.monotonic();
  }

  /** Reports a step; `item` names it on a plain line (`segment 00000000000000001000`). */
  update(state: ProgressState, item?: string): void {
    const now = this.#clock.monotonic();
    if (this.#tty) {
      if (now - this.#lastDraw < 100 && state.done < state.total) return;
      this.#lastDraw = now;
      this.#write(`\r${this.line(state)}\x1b[K`);
      if (state.done >= state.total) this.#write("\n");
      return;
    }
    this.#write(`${this.line(state)}${item ? `: ${item}` : ""}\n`);
  }

  /** The progress line (without a line break). */
  line(s: ProgressState): string {
    const seconds = Math.max(0.001, (this.#clock.monotonic() - this.#started) / 1000);
    const rate = s.bytesDone / seconds;
    const left = s.bytesTotal - s.bytesDone;
    const eta = rate > 0 && left > 0 ? ` eta ${formatDuration(left / rate)}` : "";
    return `${this.#label}: ${s.done}/${s.total}, ${humanSize(s.bytesDone)} of ${
      humanSize(s.bytesTotal)
    }, ${humanSize(rate)}/s${eta}`;
  }
}

/** `"1 h 2 m"`, `"3 m 4 s"`, `"5 s"`. */
export function formatDuration(seconds: number): string {
  const s = Math.round(seconds);
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
  if (s >= 60) return `${Math.floor(s / 60)} m ${s % 60} s`;
  return `${s} s`;
}
