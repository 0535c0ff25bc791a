// `tierd plan` says what the agent's next pass will evict and delete, and why — and then the pass
// does exactly that: the segments it evicts and the copies it deletes are the plan's. A consumer
// offset holds eviction through the broker (`wait`) and total retention alike. The plan changes
// no file: not the bucket, not the journal, not the broker's.
import assert from "node:assert/strict";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { listBounded } from "../../providers/listing.ts";
import { cli, type CliResult } from "./_cli.ts";
import { type TieredFixture, tieredFixture } from "./_tiered.ts";

interface JsonRow {
  partition: string;
  action: string;
  segment: string;
  end: string;
  bytes: number;
  reason: string;
}

async function plan(f: TieredFixture, ...args: string[]): Promise<CliResult> {
  const before = await f.snapshot();
  const r = await cli(["plan", "--config", f.configPath, ...args]);
  assert.deepEqual(await f.snapshot(), before, `plan ${args.join(" ")} changed a file`);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  return r;
}

async function planJson(f: TieredFixture): Promise<{ rows: JsonRow[]; notes: string[] }> {
  return JSON.parse((await plan(f, "--json")).stdout);
}

const partDir = (f: TieredFixture) =>
  join(f.config.agent.data_dir, "streams/0/topics/0/partitions/0");

/** The start offsets of the broker's `.log` files. */
async function localStarts(f: TieredFixture): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(partDir(f))) {
    if (e.name.endsWith(".log")) out.push(String(BigInt(e.name.slice(0, -4))));
  }
  return out.sort((a, b) => Number(a) - Number(b));
}

async function remoteStarts(f: TieredFixture): Promise<string[]> {
  return (await listBounded(f.store, "iggy/")).map((o) => o.key)
    .filter((k) => k.endsWith(".log"))
    .map((k) => String(BigInt(k.split("/").at(-1)!.slice(0, -4))));
}

/** A consumer's stored offset (Iggy 0.8: 8 bytes, little-endian). */
async function storeConsumerOffset(f: TieredFixture, offset: bigint): Promise<void> {
  const dir = join(partDir(f), "offsets/consumers");
  await mkdir(dir, { recursive: true });
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, offset, true);
  await writeFile(join(dir, "1"), bytes);
}

Deno.test("plan: what the next pass evicts and deletes, with why; the pass then does just that", async (t) => {
  const f = await tieredFixture();
  try {
    const sealed = f.segments.slice(0, -1);
    const copied = await f.pass();
    assert.deepEqual([copied.copied, copied.evicted, copied.problems], [sealed.length, 0, []]);

    await t.step("nothing set: nothing would go", async () => {
      const r = await plan(f);
      assert.match(r.stdout, /^plan: 1 partition\(s\): nothing would be evicted or deleted now/m);
    });

    await t.step("local retention: the segments evicted, oldest first, with why", async () => {
      const total = f.segments.reduce((n, s) => n + s.size, 0);
      const keep = total - sealed.slice(0, 4).reduce((n, s) => n + s.size, 0);
      await f.writeConfig(`local_retention_size = "${keep}"`);
      const { rows } = await planJson(f);
      assert.deepEqual(
        rows.map((r) => [r.action, r.segment]),
        sealed.slice(0, 4).map((s) => ["evict", String(s.startOffset)]),
      );
      assert.match(rows[0].reason, /^[\d.]+ KiB local, over local_retention_size [\d.]+ KiB$/);
      const text = await plan(f);
      const [head, first] = text.stdout.split("\n");
      assert.match(head, /^PARTITION\s+ACTION\s+SEGMENT\s+END\s+SIZE\s+REASON$/);
      assert.match(first, new RegExp(`^0/0/0\\s+evict\\s+${sealed[0].startOffset}\\s+`));
      assert.match(text.stdout, /plan: 1 partition\(s\): 4 segment\(s\) evicted locally/);

      const before = await localStarts(f);
      const pass = await f.pass();
      assert.deepEqual(pass.problems, []);
      const after = await localStarts(f);
      assert.deepEqual(
        before.filter((s) => !after.includes(s)),
        rows.map((r) => r.segment),
        "the pass evicted the plan's segments",
      );
    });

    await t.step("eviction through the broker waits for a consumer offset", async () => {
      const total = f.segments.slice(4).reduce((n, s) => n + s.size, 0);
      const keep = total - sealed.slice(4, 8).reduce((n, s) => n + s.size, 0);
      const barrier = sealed[5].startOffset + 3n; // inside the 6th segment
      await storeConsumerOffset(f, barrier);
      await f.writeConfig(
        `local_retention_size = "${keep}"`,
        (text) =>
          text.replace('evict_via = "unlink"', 'evict_via = "broker"') +
          '\n[agent.broker]\nhttp_url = "http://127.0.0.1:9"\n' +
          'personal_access_token = "never-sent-by-plan"\n',
      );
      const { rows } = await planJson(f);
      assert.deepEqual(rows.map((r) => [r.action, r.segment]), [
        ["evict", String(sealed[4].startOffset)],
        ["wait", String(sealed[5].startOffset)],
        ["wait", String(sealed[6].startOffset)],
        ["wait", String(sealed[7].startOffset)],
      ]);
      assert.match(
        rows[1].reason,
        new RegExp(`waits: eviction blocked by consumer offset ${barrier}`),
      );
    });

    await t.step(
      "total retention: expired copies below the consumer offset, with why",
      async () => {
        const barrier = sealed[5].startOffset + 3n;
        await f.writeConfig(`local_retention_size = "0"\nmessage_expiry = "1 d"`);
        const { rows, notes } = await planJson(f);
        // Eviction takes the 16 oldest local sealed segments it may; retention then deletes every
        // expired copy that ends before the barrier (copies of local segments too).
        const evicts = rows.filter((r) => r.action === "evict").map((r) => r.segment);
        assert.deepEqual(evicts, sealed.slice(4).map((s) => String(s.startOffset)));
        const deletes = rows.filter((r) => r.action === "delete");
        assert.deepEqual(
          deletes.map((r) => r.segment),
          sealed.filter((s) => s.endOffset < barrier).map((s) => String(s.startOffset)),
        );
        assert.match(deletes[0].reason, /^newest message \d+ d \d+ h old, message_expiry 1 d$/);
        assert.ok(
          notes.some((n) => n.includes(`lowest stored consumer offset (${barrier})`)),
          notes.join("\n"),
        );

        const remoteBefore = await remoteStarts(f);
        const localBefore = await localStarts(f);
        const pass = await f.pass();
        assert.deepEqual(pass.problems, []);
        const remoteAfter = await remoteStarts(f);
        const localAfter = await localStarts(f);
        assert.deepEqual(
          remoteBefore.filter((s) => !remoteAfter.includes(s)),
          deletes.map((r) => r.segment),
          "the pass deleted the plan's copies",
        );
        assert.deepEqual(localBefore.filter((s) => !localAfter.includes(s)), evicts);
      },
    );

    await t.step("bad usage: exit 2", async () => {
      const r = await cli(["plan", "--config", f.configPath, "--topic", "-1"]);
      assert.equal(r.code, 2);
    });
  } finally {
    await f.cleanup();
  }
});
