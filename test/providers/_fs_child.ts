// A child process for the fs store's multi-process tests (fs_processes_test.ts): it either
// races create-only puts (or replacements) against its siblings, or runs one write and SIGKILLs
// itself at the named step of the store's protocol. Its one argument is a JSON
// {@link ChildTask}.
import { FsStore } from "../../providers/fs/store.ts";
import type { WriteStep } from "../../providers/fs/object_files.ts";
import { StoreError } from "../../providers/types.ts";

/** What the child does. */
export type ChildTask =
  | {
    mode: "race";
    root: string;
    writer: number;
    rounds: number;
    /** The child writes `{go}.{writer}` when it is ready, then starts once `go` exists. */
    go: string;
    /**
     * Replace instead of create: round `n` puts with `ifMatch: versions[n]`, and a
     * `PreconditionFailed` is a lost round.
     */
    versions?: string[];
  }
  | {
    mode: "crash";
    root: string;
    /** `replace`: a put with `ifMatch` of the object's version, read first. */
    op: "put" | "overwrite" | "replace" | "complete" | "delete" | "migrate";
    key: string;
    /** The step to die at; undefined runs the write to its end. */
    at?: WriteStep;
  };

/** The body writer `writer` puts in round `round` (every writer's has another length). */
export function raceBody(writer: number, round: number): Uint8Array {
  const text = `writer ${writer} round ${round};`;
  return new TextEncoder().encode(text.repeat(40 + writer * 3 + round % 5));
}

/** The body of a crash test's write: `label` repeated to a length of its own. */
export function crashBody(label: string, length: number): Uint8Array {
  const out = new Uint8Array(length);
  const text = new TextEncoder().encode(label);
  for (let i = 0; i < length; i++) out[i] = text[i % text.length];
  return out;
}

if (import.meta.main) {
  const task = JSON.parse(Deno.args[0]) as ChildTask;
  if (task.mode === "race") {
    const store = new FsStore({ root: task.root });
    await Deno.writeTextFile(`${task.go}.${task.writer}`, "");
    // The go file names a start time a little ahead: both writers wait for it, then spin the
    // last milliseconds, so they start within a millisecond of each other however fast the
    // rounds are.
    let startAt: number | undefined;
    while (startAt === undefined) {
      const text = await Deno.readTextFile(task.go).catch(() => "");
      if (text !== "") startAt = Number(text);
      else await new Promise((r) => setTimeout(r, 2));
    }
    const wait = startAt - performance.timeOrigin - performance.now();
    if (wait > 5) await new Promise((r) => setTimeout(r, wait - 5));
    while (performance.timeOrigin + performance.now() < startAt) { /* spin */ }
    const won: number[] = [];
    for (let round = 0; round < task.rounds; round++) {
      const ifMatch = task.versions?.[round];
      try {
        const result = await store.put(`race/${round}`, raceBody(task.writer, round), {
          ifAbsent: ifMatch === undefined,
          ifMatch,
          metadata: { writer: String(task.writer) },
        });
        if (result.status === "Created") won.push(round);
      } catch (err) {
        if (!(ifMatch && err instanceof StoreError && err.kind === "PreconditionFailed")) throw err;
      }
    }
    console.log(JSON.stringify(won));
  } else {
    const store = new FsStore({
      root: task.root,
      minPartSize: 4,
      hooks: {
        step(step) {
          if (step === task.at) Deno.kill(Deno.pid, "SIGKILL");
        },
      },
    });
    const key = task.key;
    switch (task.op) {
      case "put":
      case "overwrite":
        await store.put(key, crashBody("new ", 3000), { metadata: { writer: "new" } });
        break;
      case "replace": {
        const { version } = await store.head(key);
        await store.put(key, crashBody("new ", 3000), {
          ifMatch: version,
          metadata: { writer: "new" },
        });
        break;
      }
      case "complete": {
        const id = await store.createMultipart(key, { metadata: { writer: "new" } });
        const p1 = await store.putPart(key, id, 1, crashBody("new ", 2000));
        const p2 = await store.putPart(key, id, 2, crashBody("new ", 1000));
        await store.completeMultipart(key, id, [p1, p2], { ifAbsent: true });
        break;
      }
      case "delete":
        await store.deleteMany([key]);
        break;
      case "migrate":
        await store.list(""); // the first call opens the store, which migrates
        break;
    }
  }
}
