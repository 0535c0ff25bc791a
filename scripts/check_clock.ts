// CI check: tierd reads the time and waits only through its `Clock` (src/base/clock.ts), so
// tests can run it on a fake clock. Fails on a raw `Date.now()`, `new Date()` without an
// argument, `performance.now()`, or a `setTimeout`/`setInterval`/`setImmediate` timer in the
// agent's code (main.ts, src/, providers/) outside the clock module. Comments and strings are
// ignored. Usage: `deno task check:clock [root]`.
import { readdir, readFile } from "node:fs/promises";
import { join, relative } from "node:path";

/** The one module allowed to touch the real clock. */
export const CLOCK_MODULE = "src/base/clock.ts";

/** What the check looks for, with the name it reports. */
const RAW_TIME: readonly { name: string; pattern: RegExp }[] = [
  { name: "Date.now()", pattern: /\bDate\s*\.\s*now\b/ },
  { name: "new Date()", pattern: /\bnew\s+Date\s*\(\s*\)/ },
  { name: "performance.now()", pattern: /\bperformance\s*\.\s*now\b/ },
  { name: "setTimeout", pattern: /\bsetTimeout\b/ },
  { name: "setInterval", pattern: /\bsetInterval\b/ },
  { name: "setImmediate", pattern: /\bsetImmediate\b/ },
];

/** One use of the real clock outside the clock module. */
export interface RawTimeUse {
  file: string;
  line: number;
  what: string;
  text: string;
}

/**
 * Finds raw clock and timer uses in the agent's code under `root`.
 * @returns every use, in file and line order
 */
export async function findRawTime(root: string): Promise<RawTimeUse[]> {
  const files = [join(root, "main.ts")];
  for (const dir of ["src", "providers"]) files.push(...await tsFiles(join(root, dir)));
  const out: RawTimeUse[] = [];
  for (const path of files.sort()) {
    const file = relative(root, path);
    if (file === CLOCK_MODULE) continue;
    let source: string;
    try {
      source = await readFile(path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") continue;
      throw err;
    }
    const code = stripCommentsAndStrings(source).split("\n");
    const lines = source.split("\n");
    code.forEach((text, i) => {
      for (const { name, pattern } of RAW_TIME) {
        if (pattern.test(text)) out.push({ file, line: i + 1, what: name, text: lines[i].trim() });
      }
    });
  }
  return out;
}

async function tsFiles(dir: string): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const out: string[] = [];
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) out.push(...await tsFiles(path));
    else if (e.name.endsWith(".ts")) out.push(path);
  }
  return out;
}

/**
 * Blanks out comments and the contents of string and template literals, keeping line breaks,
 * so a pattern only matches code. (Template `${…}` expressions are blanked too: a timer hidden
 * in one is not worth a parser.)
 */
export function stripCommentsAndStrings(source: string): string {
  let out = "";
  let i = 0;
  const n = source.length;
  const blank = (c: string) => (c === "\n" ? "\n" : " ");
  // A `/` starts a regular expression after an operator, an opening bracket, or `return`.
  const regexMayStart = () => {
    const before = out.trimEnd();
    return before === "" || /[(,=:[!&|?{};+\-*%<>~^]$/.test(before) ||
      /(^|[^\w$])(return|typeof|case|void|yield|await)$/.test(before);
  };
  while (i < n) {
    const c = source[i];
    const next = source[i + 1];
    if (c === "/" && next === "/") {
      while (i < n && source[i] !== "\n") (out += " "), i++;
    } else if (c === "/" && next === "*") {
      out += "  ";
      i += 2;
      while (i < n && !(source[i] === "*" && source[i + 1] === "/")) out += blank(source[i++]);
      out += "  ";
      i += 2;
    } else if (c === "/" && regexMayStart()) {
      out += c;
      i++;
      let inClass = false;
      while (i < n && source[i] !== "\n" && (inClass || source[i] !== "/")) {
        if (source[i] === "\\") (out += " "), i++;
        else if (source[i] === "[") inClass = true;
        else if (source[i] === "]") inClass = false;
        if (i < n) out += blank(source[i++]);
      }
      out += "/";
      i++;
    } else if (c === '"' || c === "'" || c === "`") {
      out += c;
      i++;
      while (i < n && source[i] !== c) {
        if (source[i] === "\\") (out += blank(source[i])), i++;
        if (i < n) out += blank(source[i++]);
      }
      out += c;
      i++;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

if (import.meta.main) {
  const root = Deno.args[0] ?? ".";
  const uses = await findRawTime(root);
  for (const u of uses) {
    console.error(`${u.file}:${u.line}: raw ${u.what} outside ${CLOCK_MODULE}: ${u.text}`);
  }
  if (uses.length > 0) {
    console.error(
      `check:clock: ${uses.length} raw time use(s); take a Clock (src/base/clock.ts) instead`,
    );
    Deno.exit(1);
  }
  console.log("check:clock: ok: time is read and waited for only through the Clock");
}
