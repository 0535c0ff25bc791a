// scripts/check_clock.ts: the agent's code reads time only through the Clock, and the checker
// finds planted raw uses while ignoring comments, strings and regular expressions.
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { findRawTime, stripCommentsAndStrings } from "../../scripts/check_clock.ts";
import { tempDir } from "../_util.ts";

const REPO = join(dirname(new URL(import.meta.url).pathname), "..", "..");

Deno.test("check:clock: no raw Date.now, timers or performance.now outside src/base/clock.ts", async () => {
  const uses = await findRawTime(REPO);
  assert.deepEqual(uses.map((u) => `${u.file}:${u.line}: ${u.text}`), []);
});

Deno.test("check:clock: planted uses are found; comments, strings and regexes are not code", async () => {
  const tmp = await tempDir("tierd-check-clock");
  try {
    const write = async (path: string, text: string) => {
      await Deno.mkdir(dirname(join(tmp.path, path)), { recursive: true });
      await Deno.writeTextFile(join(tmp.path, path), text);
    };
    await write("main.ts", "const started = performance.now();\n");
    await write(
      "src/a.ts",
      [
        "// Date.now() in a comment",
        "/* setTimeout(f, 1) */",
        'const s = "new Date()";',
        "const re = /['\"]/g; const t = Date.now();",
        "const later = setTimeout(() => {}, 5);",
        "const d = new Date(0); // with an argument: a conversion, not a clock read",
        "const u = `Date.now() ${1}`;",
      ].join("\n"),
    );
    await write("src/base/clock.ts", "export const now = () => Date.now();\n");
    await write("test/b_test.ts", "Date.now();\n"); // tests may use real time
    const uses = await findRawTime(tmp.path);
    assert.deepEqual(uses.map((u) => `${u.file}:${u.line}:${u.what}`), [
      "main.ts:1:performance.now()",
      "src/a.ts:4:Date.now()",
      "src/a.ts:5:setTimeout",
    ]);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("stripCommentsAndStrings keeps line breaks and code, blanks the rest", () => {
  const src = 'a(); // x\nb("y\\"z"); /* c\nd */ e(/[/"]/);\n';
  const out = stripCommentsAndStrings(src);
  assert.equal(out.split("\n").length, src.split("\n").length);
  assert.match(out, /a\(\);/);
  assert.match(out, /b\(" *"\);/);
  assert.match(out, /e\(\/ *\/\);/);
  assert.doesNotMatch(out, /[xyzcd]/);
});
