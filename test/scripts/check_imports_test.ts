// scripts/check_imports.ts: the repository has no import cycle, no private provider import and
// no import against its layers, and the checker itself finds planted ones (an upward import, a
// room no layer places, a port's value import where only its types are tolerated; a cycle through
// a type-only import and a re-export, a self-import, private imports) while ignoring dynamic
// imports and import text in strings.
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  ALLOWED_PRIVATE_IMPORTS,
  ALLOWED_UPWARD_IMPORTS,
  checkImports,
  cyclesOf,
  cyclicComponents,
  type ImportGraph,
  layerOf,
  LAYERS,
  report,
} from "../../scripts/check_imports.ts";
import { tempDir } from "../_util.ts";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CHECKER = join(REPO, "scripts", "check_imports.ts");

/** Runs the checker as `deno task check:imports` does, with `args`; returns exit code and lines. */
async function runChecker(args: string[]): Promise<{ code: number; lines: string[] }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--allow-write", "--allow-run", CHECKER, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, lines: text.split("\n").filter((l) => l !== "") };
}

async function writeTree(root: string, files: Record<string, string>): Promise<void> {
  for (const [path, text] of Object.entries(files)) {
    await Deno.mkdir(dirname(join(root, path)), { recursive: true });
    await Deno.writeTextFile(join(root, path), text);
  }
}

Deno.test("check:imports: the repository has no import cycle and no private provider import", async () => {
  const { code, lines } = await runChecker([]);
  assert.equal(code, 0, lines.join("\n"));
  // One line: the summary. A second would be a note that an allowance is stale (remove it).
  assert.equal(lines.length, 1, lines.join("\n"));
  assert.match(lines[0], /^check:imports: ok: \d+ files, \d+ imports, no cycles/);
  // The only tolerated private import is one inside src/tier/, which another change is moving.
  for (const a of ALLOWED_PRIVATE_IMPORTS) assert.ok(a.from.startsWith("src/tier/"), a.from);
});

Deno.test("check:imports: a planted cycle and planted private imports fail with their paths", async () => {
  const tmp = await tempDir("check-imports");
  try {
    await writeTree(tmp.path, {
      "main.ts": 'import { a } from "./src/a.ts";\nconsole.log(a);\n',
      // a → b (value), b → c (type-only), c → a (re-export): one cycle of three.
      "src/a.ts": [
        'import { b } from "./b.ts";',
        'import { text } from "./doc.ts";',
        "export const a = b + text.length;",
      ].join("\n"),
      "src/b.ts": 'import type { T } from "./c.ts";\nexport const b: T = 2;\n',
      "src/c.ts": 'export { a } from "./a.ts";\nexport type T = number;\n',
      // Import text inside a string is not an import (no doc.ts → a.ts edge).
      "src/doc.ts": "export const text = 'import { a } from \"./a.ts\";';\n",
      // A dynamic import is not a static edge: no cycle between lazy.ts and uses_lazy.ts.
      "src/lazy.ts": 'export const load = () => import("./uses_lazy.ts");\n',
      "src/uses_lazy.ts": 'import { load } from "./lazy.ts";\nexport const again = load;\n',
      "src/self.ts": 'import "./self.ts";\n',
      "src/store.ts":
        'import { secret } from "../providers/_secret.ts";\nexport const s = secret;\n',
      "providers/_secret.ts": "export const secret = 1;\n",
      "providers/s3/_sign.ts": "export const sign = 2;\n",
      // Inside providers/, private files are fine to import.
      "providers/s3/store.ts": [
        'import { secret } from "../_secret.ts";',
        'import { sign } from "./_sign.ts";',
        "export const both = secret + sign;",
      ].join("\n"),
      "test/x_test.ts": 'import { sign } from "../providers/s3/_sign.ts";\nconsole.log(sign);\n',
    });
    const { code, lines } = await runChecker(["--root", tmp.path]);
    assert.equal(code, 1, lines.join("\n"));
    assert.deepEqual(lines.slice(0, -1), [
      "import cycle: src/a.ts → src/b.ts → src/c.ts → src/a.ts",
      "import cycle: src/self.ts → src/self.ts",
      "private provider import: src/store.ts → providers/_secret.ts",
      "private provider import: test/x_test.ts → providers/s3/_sign.ts",
    ]);
    assert.match(lines.at(-1)!, /^check:imports: FAILED: 2 cycle\(s\), 2 private provider import/);

    // Break the cycle and drop the private imports: the same tree passes.
    await Deno.writeTextFile(join(tmp.path, "src/c.ts"), "export type T = number;\n");
    await Deno.writeTextFile(join(tmp.path, "src/self.ts"), "export {};\n");
    await Deno.remove(join(tmp.path, "src/store.ts"));
    await Deno.remove(join(tmp.path, "test/x_test.ts"));
    const clean = await runChecker(["--root", tmp.path]);
    assert.equal(clean.code, 0, clean.lines.join("\n"));
    assert.deepEqual(clean.lines.length, 1, clean.lines.join("\n"));
    assert.match(clean.lines[0], /^check:imports: ok: 11 files, \d+ imports, no cycles/);
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("check:imports: every file of a component shows in some printed cycle", () => {
  // a ↔ b and b ↔ c: one component, two cycles, and neither alone names all three files.
  const edge = (from: string, to: string) => ({ from, to, typeOnly: false });
  const graph: ImportGraph = new Map([
    ["a.ts", [edge("a.ts", "b.ts")]],
    ["b.ts", [edge("b.ts", "a.ts"), edge("b.ts", "c.ts")]],
    ["c.ts", [edge("c.ts", "b.ts")]],
    ["d.ts", [edge("d.ts", "a.ts")]],
  ]);
  const components = cyclicComponents(graph);
  assert.deepEqual(components, [["a.ts", "b.ts", "c.ts"]]);
  assert.deepEqual(cyclesOf(graph, components[0]), [
    ["a.ts", "b.ts", "a.ts"],
    ["b.ts", "c.ts", "b.ts"],
  ]);
});

Deno.test("check:imports: an import against the layers fails, naming both files and layers", async () => {
  const tmp = await tempDir("check-imports-layers");
  try {
    await writeTree(tmp.path, {
      "main.ts": 'import { run } from "./src/cli/run.ts";\nrun();\n',
      "src/cli/run.ts":
        'import { now } from "../base/clock.ts";\nexport const run = () => now();\n',
      // base (lowest) reaching up into the cli: wrong.
      "src/base/clock.ts":
        'import type { T } from "../cli/types.ts";\nexport const now = (): T => 1;\n',
      "src/cli/types.ts": "export type T = number;\n",
      // A port's type, tolerated upward when listed.
      "src/base/port.ts": 'import type { T } from "../cli/types.ts";\nexport type P = T;\n',
      // A room no layer places.
      "src/attic/old.ts": 'import { now } from "../base/clock.ts";\nexport const old = now;\n',
      // Tests import anything.
      "test/a_test.ts": 'import { run } from "../src/cli/run.ts";\nrun();\n',
    });
    const layers = [
      { name: "base", rooms: ["src/base"] },
      { name: "cli", rooms: ["src/cli"] },
      { name: "entry", rooms: ["main.ts"] },
    ];
    const result = await checkImports(tmp.path, {
      roots: ["main.ts", "src", "test"],
      layers,
      allowedUpward: [{ from: "src/base/port.ts", to: "src/cli/types.ts", why: "a port" }],
    });
    assert.deepStrictEqual(
      result.layerViolations.map((v) => `${v.from} (${v.fromLayer}) → ${v.to} (${v.toLayer})`),
      [
        "src/attic/old.ts (undefined) → src/base/clock.ts (base)",
        "src/base/clock.ts (base) → src/cli/types.ts (cli)",
      ],
    );
    const lines: string[] = [];
    assert.equal(report(result, (l) => lines.push(l)), 1);
    assert.ok(lines.some((l) => l.includes("no layer places") && l.includes("src/attic/old.ts")));
    assert.match(lines.at(-1)!, /FAILED: 0 cycle\(s\), 0 private provider import\(s\), 2 import/);
    // The tolerance is for type-only imports: the same edge carrying a value fails.
    await writeTree(tmp.path, {
      "src/base/port.ts": 'import { type T, v } from "../cli/types.ts";\nexport const p: T = v;\n',
      "src/cli/types.ts": "export type T = number;\nexport const v = 1;\n",
    });
    const again = await checkImports(tmp.path, {
      roots: ["main.ts", "src", "test"],
      layers,
      allowedUpward: [{ from: "src/base/port.ts", to: "src/cli/types.ts", why: "a port" }],
    });
    assert.ok(again.layerViolations.some((v) => v.from === "src/base/port.ts"));
  } finally {
    await tmp.cleanup();
  }
});

Deno.test("check:imports: every room of src/ and providers/ has a layer, and each allowance still holds", async () => {
  const rooms = new Set<string>();
  for (const top of ["src", "providers"]) {
    for await (const e of Deno.readDir(join(REPO, top))) {
      if (e.name.endsWith("_test.ts")) continue;
      if (e.isDirectory || e.name.endsWith(".ts")) rooms.add(`${top}/${e.name}`);
    }
  }
  for (const room of rooms) assert.notEqual(layerOf(room, LAYERS), -1, `${room} has no layer`);
  for (const a of ALLOWED_UPWARD_IMPORTS) {
    assert.ok(layerOf(a.from, LAYERS) < layerOf(a.to, LAYERS), `${a.from} → ${a.to} is not upward`);
  }
});
