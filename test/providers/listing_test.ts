// Listing and deleting against a model: any sequence of puts and deletes, then every prefix and
// page size lists exactly the model's keys in UTF-8 order. Run against fs and sim alike.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import fc from "fast-check";
import { FsStore } from "../../providers/fs/store.ts";
import { SimStore } from "../../providers/sim/store.ts";
import { type ObjectStore } from "../../providers/types.ts";
import { tempDir } from "../_util.ts";

// Folder names and file names are disjoint, so no key is both an object and a folder (the one
// thing the fs store refuses).
const folder = fc.constantFrom("a", "b", "é", "日本", "a b", "a-b");
const file = fc.constantFrom("x.log", "y", "～", "😀", "a+b=c", "%41", "a.b");
const key = fc.tuple(fc.array(folder, { maxLength: 3 }), file).map(([dirs, name]) =>
  [...dirs, name].join("/")
);
const command = fc.oneof(
  fc.record({ op: fc.constant("put" as const), key }),
  fc.record({ op: fc.constant("delete" as const), keys: fc.array(key, { maxLength: 3 }) }),
);
const prefix = fc.oneof(
  fc.constant(""),
  key.map((k) => k.slice(0, Math.ceil(k.length / 2))),
  key.map((k) => k.slice(0, k.lastIndexOf("/") + 1)),
);

const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

async function listPaged(store: ObjectStore, p: string, maxKeys: number): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const page = await store.list(p, { maxKeys, continuationToken: token });
    assert.ok(page.objects.length <= maxKeys);
    keys.push(...page.objects.map((o) => o.key));
    token = page.continuationToken;
    assert.ok(keys.length < 1000, "paging ends");
  } while (token);
  return keys;
}

async function checkAgainstModel(
  open: () => Promise<{ store: ObjectStore; close(): Promise<void> }>,
) {
  await fc.assert(
    fc.asyncProperty(
      fc.array(command, { maxLength: 25 }),
      fc.array(prefix, { minLength: 1, maxLength: 4 }),
      fc.integer({ min: 1, max: 4 }),
      async (commands, prefixes, maxKeys) => {
        const { store, close } = await open();
        try {
          const model = new Map<string, number>();
          for (const [i, c] of commands.entries()) {
            if (c.op === "put") {
              await store.put(c.key, new Uint8Array(i));
              model.set(c.key, i);
            } else {
              assert.deepEqual(await store.deleteMany(c.keys), []);
              for (const k of c.keys) model.delete(k);
            }
          }
          for (const p of prefixes) {
            const expected = [...model.keys()].filter((k) => k.startsWith(p)).sort(byUtf8);
            assert.deepEqual(
              await listPaged(store, p, maxKeys),
              expected,
              `prefix ${JSON.stringify(p)}`,
            );
          }
          for (const [k, size] of model) assert.equal((await store.head(k)).size, size);
        } finally {
          await close();
        }
      },
    ),
    { numRuns: 60 },
  );
}

Deno.test("sim lists exactly its model's keys, in order, on every page size", async () => {
  await checkAgainstModel(() =>
    Promise.resolve({ store: new SimStore(), close: () => Promise.resolve() })
  );
});

Deno.test("fs lists exactly its model's keys, in order, on every page size", async () => {
  await checkAgainstModel(async () => {
    const dir = await tempDir("tierd-fs-model");
    return { store: new FsStore({ root: dir.path }), close: dir.cleanup };
  });
});
