// The process's resource limits, as far as the platform tells them: the open-file limit bounds
// how many connections the HTTP server may hold.
import { readFileSync } from "node:fs";

/**
 * The soft limit on open files (`ulimit -n`), from `/proc/self/limits`; undefined where it
 * cannot be read (not Linux) or is unlimited.
 */
export function openFileLimit(): number | undefined {
  try {
    const text = readFileSync("/proc/self/limits", "utf8");
    const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
    if (!m || m[1] === "unlimited") return undefined;
    return Number(m[1]);
  } catch {
    return undefined;
  }
}
