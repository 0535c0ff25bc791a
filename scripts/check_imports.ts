// `deno task check:imports`: fails (exit 1) on an import cycle between the repository's modules,
// type-only imports included, on an import of a provider's private `_` file from outside
// providers/, or on an import against the layers (LAYERS, as docs/architecture.md states them:
// a room imports only its own layer and the ones below). The graph comes from `deno info
// --json`, so imports are read by Deno's own parser.
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The top-level files and directories walked when none are given. */
export const DEFAULT_ROOTS: readonly string[] = [
  "main.ts",
  "src",
  "providers",
  "scripts",
  "bench",
  "test",
];

/** Directories never walked: installed packages anywhere, and benchmark output. */
const SKIPPED_DIR_NAMES = new Set(["node_modules", ".git"]);
const SKIPPED_PATHS = new Set(["bench/results"]);

/** Module files, by extension. */
const MODULE_FILE = /\.(?:[cm]?[jt]s|[jt]sx)$/;

/**
 * A private provider import tolerated for now, because the importing file is being moved by a
 * change in progress elsewhere. Only the repository check applies these (not `--root`).
 */
export interface AllowedImport {
  /** The importing file. */
  from: string;
  /** The private provider file it imports. */
  to: string;
  /** Why it is tolerated and what removes it. */
  why: string;
}

/** The private provider imports tolerated in this repository today; keep this list shrinking. */
export const ALLOWED_PRIVATE_IMPORTS: readonly AllowedImport[] = [];

/** One layer of the agent's code: rooms (folders, or single files) that may import each other. */
export interface Layer {
  /** What the layer is, for the report. */
  name: string;
  /** Its rooms: a folder (`src/cache`) holds every file under it, a file (`src/log.ts`) itself. */
  rooms: readonly string[];
}

/**
 * The layers of the agent's code, lowest first (docs/architecture.md, "Layers"). A file in a
 * layer imports only files of its own layer or of a lower one; files in no room of any layer
 * under src/ or providers/ are refused too (a new room must be placed), while test/, bench/ and
 * scripts/ may import anything.
 */
export const LAYERS: readonly Layer[] = [
  { name: "base", rooms: ["src/base"] },
  { name: "providers", rooms: ["providers"] },
  { name: "foundation", rooms: ["src/scrub.ts", "src/version.ts", "src/hash.ts", "src/log.ts"] },
  {
    name: "model",
    rooms: ["src/config", "src/format", "src/layout", "src/state", "src/partition"],
  },
  {
    name: "services",
    rooms: [
      "src/store.ts",
      "src/store_credentials.ts",
      "src/ownership",
      "src/metrics",
      "src/cache",
      "src/read",
      "src/iggy_front",
    ],
  },
  {
    name: "worker and fronts",
    rooms: ["src/tier", "src/restore", "src/runtime", "src/http", "src/iggy_http", "src/iggy_tcp"],
  },
  { name: "agent", rooms: ["src/agent"] },
  { name: "cli", rooms: ["src/cli"] },
  { name: "entry", rooms: ["main.ts"] },
];

/** A type-only import against the layers, tolerated because a lower room implements a port. */
export interface AllowedUpward {
  from: string;
  to: string;
  why: string;
}

/** The upward imports tolerated in this repository: type-only, each with its reason. */
export const ALLOWED_UPWARD_IMPORTS: readonly AllowedUpward[] = [
  {
    from: "src/metrics/observers.ts",
    to: "src/tier/observer.ts",
    why: "the metrics implement the tier worker's observer port (its hooks are the tier's types)",
  },
];

/** An import against the layers (or from a file no layer places). */
export interface LayerViolation extends ImportEdge {
  /** The importing file's layer, or undefined when no room holds it. */
  fromLayer?: string;
  /** The imported file's layer. */
  toLayer?: string;
}

/** The index in `layers` of the layer whose room holds `file`, or -1. */
export function layerOf(file: string, layers: readonly Layer[]): number {
  return layers.findIndex((l) =>
    l.rooms.some((room) => file === room || file.startsWith(room + "/"))
  );
}

/** Whether `file` is agent code the layers must place (src/, providers/, main.ts). */
function isAgentCode(file: string): boolean {
  return file === "main.ts" || file.startsWith("src/") || file.startsWith("providers/");
}

/**
 * The imports of `graph` against `layers`: from a lower layer to a higher one (a type-only one
 * listed in `allowed` excepted), and from agent code no layer places.
 */
export function layerViolations(
  graph: ImportGraph,
  layers: readonly Layer[],
  allowed: readonly AllowedUpward[] = [],
): LayerViolation[] {
  const out: LayerViolation[] = [];
  if (layers.length === 0) return out;
  for (const edges of graph.values()) {
    for (const e of edges) {
      if (!isAgentCode(e.from)) continue;
      const from = layerOf(e.from, layers);
      const to = layerOf(e.to, layers);
      if (from === -1) {
        out.push({ ...e, toLayer: layers[to]?.name });
        continue;
      }
      if (to === -1 && !isAgentCode(e.to)) continue; // a test helper's re-export, say
      if (to !== -1 && to <= from) continue;
      if (e.typeOnly && allowed.some((a) => a.from === e.from && a.to === e.to)) continue;
      out.push({ ...e, fromLayer: layers[from].name, toLayer: layers[to]?.name });
    }
  }
  return out.sort((a, b) => a.from.localeCompare(b.from) || a.to.localeCompare(b.to));
}

/** One static import or re-export between two repository files (paths relative to the root). */
export interface ImportEdge {
  /** The importing file. */
  from: string;
  /** The imported file. */
  to: string;
  /** True when the import is type-only (`import type`, `export type … from`). */
  typeOnly: boolean;
}

/** The import graph: each walked file with the repository files it imports statically. */
export type ImportGraph = Map<string, ImportEdge[]>;

/** What the check found; `cycles` and `privateImports` both empty means the tree passes. */
export interface CheckResult {
  /** Number of files walked. */
  files: number;
  /** Number of import edges between them. */
  edges: number;
  /** Each cycle as a path of files that starts and ends at the same file. */
  cycles: string[][];
  /** Imports of a provider's private `_` file from outside providers/, not allowed. */
  privateImports: ImportEdge[];
  /** Private provider imports found and tolerated by an {@link AllowedImport}. */
  allowed: ImportEdge[];
  /** Allowances that matched no import: the change they waited for has landed. */
  staleAllowances: AllowedImport[];
  /** Imports against the layers. */
  layerViolations: LayerViolation[];
}

/** Lists the module files (`.ts`, `.tsx`, `.js`, …) under `roots` (relative to `root`), sorted. */
export async function listModules(
  root: string,
  roots: readonly string[] = DEFAULT_ROOTS,
): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    let info: Deno.FileInfo;
    try {
      info = await Deno.stat(join(root, rel));
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return;
      throw e;
    }
    if (info.isFile) {
      if (MODULE_FILE.test(rel)) out.push(rel);
      return;
    }
    if (SKIPPED_PATHS.has(toPosix(rel))) return;
    for await (const entry of Deno.readDir(join(root, rel))) {
      if (entry.isDirectory && SKIPPED_DIR_NAMES.has(entry.name)) continue;
      await walk(join(rel, entry.name));
    }
  };
  for (const r of roots) await walk(r);
  return out.map(toPosix).sort();
}

/**
 * Builds the static import graph of `files` (relative to `root`) with `deno info --json` run on a
 * throwaway module that imports them all, under the root's deno.json when it has one (so an
 * import map would apply). Dynamic `import()` is not an edge; imports that leave the walked
 * files (npm packages, `node:` modules, files outside `roots`) are dropped.
 */
export async function importGraph(root: string, files: readonly string[]): Promise<ImportGraph> {
  const absRoot = resolve(root);
  const tmp = await Deno.makeTempDir({ prefix: "tierd-check-imports-" });
  try {
    const entry = join(tmp, "all.ts");
    const lines = files.map((f) =>
      `import ${JSON.stringify(pathToFileURL(join(absRoot, f)).href)};`
    );
    await Deno.writeTextFile(entry, lines.join("\n") + "\n");
    const config = join(absRoot, "deno.json");
    const configArgs = await exists(config) ? ["--config", config] : ["--no-config"];
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", ...configArgs, "--no-npm", "--no-remote", "--no-lock", entry],
      cwd: tmp,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) {
      throw new Error(`deno info failed: ${new TextDecoder().decode(out.stderr).trim()}`);
    }
    return graphFromInfo(absRoot, files, JSON.parse(new TextDecoder().decode(out.stdout)));
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

/** The parts of `deno info --json` output this check reads. */
interface DenoInfo {
  modules: {
    specifier: string;
    error?: string;
    dependencies?: {
      specifier: string;
      isDynamic?: boolean;
      code?: { specifier?: string };
      type?: { specifier?: string };
    }[];
  }[];
}

function graphFromInfo(absRoot: string, files: readonly string[], info: DenoInfo): ImportGraph {
  const walked = new Set(files);
  const graph: ImportGraph = new Map(files.map((f) => [f, []]));
  const toRel = (specifier: string | undefined): string | undefined => {
    if (!specifier?.startsWith("file:")) return undefined;
    const rel = toPosix(relative(absRoot, fileURLToPath(specifier)));
    return walked.has(rel) ? rel : undefined;
  };
  for (const mod of info.modules) {
    const from = toRel(mod.specifier);
    if (from === undefined) continue;
    if (mod.error) throw new Error(`${from}: ${mod.error}`);
    const edges = graph.get(from)!;
    for (const dep of mod.dependencies ?? []) {
      if (dep.isDynamic) continue;
      const to = toRel(dep.code?.specifier) ?? toRel(dep.type?.specifier);
      if (to === undefined) continue;
      edges.push({ from, to, typeOnly: dep.code === undefined });
    }
  }
  return graph;
}

/**
 * Tarjan's strongly connected components of `graph`. Returns the components that hold a cycle
 * (more than one file, or one file importing itself), each sorted, in sorted order.
 */
export function cyclicComponents(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const { to: w } of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    const selfLoop = (graph.get(v) ?? []).some((e) => e.to === v);
    if (component.length > 1 || selfLoop) components.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return components.sort((a, b) => a[0].localeCompare(b[0]));
}

/**
 * Cycles that together name every file of `component`: for each file, the shortest cycle through
 * it inside the component, each written once (`[a, b, a]`), rotations of one cycle counted once.
 */
export function cyclesOf(graph: ImportGraph, component: readonly string[]): string[][] {
  const members = new Set(component);
  const seen = new Set<string>();
  const cycles: string[][] = [];
  for (const start of component) {
    // Breadth-first from `start` back to `start`, staying inside the component.
    const parent = new Map<string, string>();
    const queue = [start];
    let closing: string | undefined;
    while (queue.length > 0 && closing === undefined) {
      const v = queue.shift()!;
      for (const { to } of graph.get(v) ?? []) {
        if (to === start) {
          closing = v;
          break;
        }
        if (members.has(to) && !parent.has(to)) {
          parent.set(to, v);
          queue.push(to);
        }
      }
    }
    if (closing === undefined) continue;
    const path = [closing];
    while (path[0] !== start) path.unshift(parent.get(path[0])!);
    const rotated = rotateToSmallest(path);
    const key = rotated.join("\0");
    if (seen.has(key)) continue;
    seen.add(key);
    cycles.push([...rotated, rotated[0]]);
  }
  return cycles;
}

function rotateToSmallest(path: string[]): string[] {
  let at = 0;
  for (let i = 1; i < path.length; i++) if (path[i] < path[at]) at = i;
  return [...path.slice(at), ...path.slice(0, at)];
}

/** True for a provider's private file: `providers/_x.ts` or `providers/<name>/_x.ts`. */
export function isProviderPrivate(file: string): boolean {
  return /^providers\/(?:[^/]+\/)?_[^/]*$/.test(file);
}

/** Imports of a provider's private `_` file by a file outside providers/. */
export function privateProviderImports(graph: ImportGraph): ImportEdge[] {
  const out: ImportEdge[] = [];
  for (const edges of graph.values()) {
    for (const e of edges) {
      if (!e.from.startsWith("providers/") && isProviderPrivate(e.to)) out.push(e);
    }
  }
  return out.sort((a, b) => a.from.localeCompare(b.from) || a.to.localeCompare(b.to));
}

/** Options of {@link checkImports}. */
export interface CheckOptions {
  /** Files and directories to walk, relative to the root. @default DEFAULT_ROOTS */
  roots?: readonly string[];
  /** Private provider imports to tolerate. @default [] */
  allowed?: readonly AllowedImport[];
  /** The layers to check (none: no layer check). @default [] */
  layers?: readonly Layer[];
  /** Type-only upward imports to tolerate. @default [] */
  allowedUpward?: readonly AllowedUpward[];
}

/** Walks the roots under `root`, builds the graph and returns its cycles and private imports. */
export async function checkImports(root: string, options: CheckOptions = {}): Promise<CheckResult> {
  const files = await listModules(root, options.roots ?? DEFAULT_ROOTS);
  const graph = await importGraph(root, files);
  const cycles = cyclicComponents(graph).flatMap((c) => cyclesOf(graph, c));
  let edges = 0;
  for (const e of graph.values()) edges += e.length;
  const allowances = options.allowed ?? [];
  const isAllowed = (e: ImportEdge) => allowances.some((a) => a.from === e.from && a.to === e.to);
  const found = privateProviderImports(graph);
  const allowed = found.filter(isAllowed);
  return {
    files: files.length,
    edges,
    cycles,
    privateImports: found.filter((e) => !isAllowed(e)),
    allowed,
    staleAllowances: allowances.filter((a) =>
      !allowed.some((e) => e.from === a.from && e.to === a.to)
    ),
    layerViolations: layerViolations(graph, options.layers ?? [], options.allowedUpward ?? []),
  };
}

/**
 * Writes the report for `result`: one line per cycle and per private import, then a summary
 * line. Returns the exit code: 1 when a cycle or a private import was found, else 0.
 */
export function report(result: CheckResult, write: (line: string) => void = console.log): number {
  for (const cycle of result.cycles) write(`import cycle: ${cycle.join(" → ")}`);
  for (const e of result.privateImports) {
    write(`private provider import: ${e.from} → ${e.to}`);
  }
  for (const v of result.layerViolations) {
    write(
      v.fromLayer === undefined
        ? `import from a file no layer places (add its room to LAYERS): ${v.from} → ${v.to}`
        : `import against the layers: ${v.from} (${v.fromLayer}) → ${v.to} (${
          v.toLayer ?? "no layer"
        })`,
    );
  }
  for (const a of result.staleAllowances) {
    write(`note: allowance no longer needed, remove it: ${a.from} → ${a.to}`);
  }
  const tolerated = result.allowed.length === 0
    ? ""
    : ` (tolerated for now: ${result.allowed.map((e) => `${e.from} → ${e.to}`).join(", ")})`;
  const failures = result.cycles.length + result.privateImports.length +
    result.layerViolations.length;
  if (failures > 0) {
    write(
      `check:imports: FAILED: ${result.cycles.length} cycle(s), ${result.privateImports.length} ` +
        `private provider import(s), ${result.layerViolations.length} import(s) against the ` +
        `layers in ${result.files} files${tolerated}`,
    );
    return 1;
  }
  write(
    `check:imports: ok: ${result.files} files, ${result.edges} imports, no cycles, ` +
      `no private provider imports, no import against the layers${tolerated}`,
  );
  return 0;
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

function toPosix(path: string): string {
  return sep === "/" ? path : path.split(sep).join("/");
}

if (import.meta.main) {
  // Usage: check_imports.ts [--root DIR] [PATH…]. Without --root: this repository, with its
  // allowances. PATHs (relative to the root) default to DEFAULT_ROOTS.
  const args = [...Deno.args];
  let root = join(dirname(fileURLToPath(import.meta.url)), "..");
  let allowed: readonly AllowedImport[] = ALLOWED_PRIVATE_IMPORTS;
  let layers: readonly Layer[] = LAYERS;
  const at = args.indexOf("--root");
  if (at >= 0) {
    if (args[at + 1] === undefined) {
      console.error("usage: check_imports.ts [--root DIR] [PATH…]");
      Deno.exit(2);
    }
    root = args[at + 1];
    allowed = [];
    layers = [];
    args.splice(at, 2);
  }
  const roots = args.length > 0 ? args : DEFAULT_ROOTS;
  Deno.exit(
    report(
      await checkImports(root, { roots, allowed, layers, allowedUpward: ALLOWED_UPWARD_IMPORTS }),
    ),
  );
}
