// The agent's identity in its state dir: made once and kept (the same id at every start, the key
// space recorded once claimed); a damaged agent.json is an IdentityError naming the file and
// what is wrong, never silently replaced by a new identity (which would look like another agent
// to the owner record), and `tierd run` refuses with it (exit 2) before it writes anything.
import assert from "node:assert/strict";
import { readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  ensureIdentity,
  IDENTITY_FILE,
  IdentityError,
  loadIdentity,
  saveIdentity,
} from "../../src/ownership/identity.ts";
import { testConfigText } from "../_config.ts";
import { generatePartition } from "../../src/format/generate.ts";
import { tempDir } from "../_util.ts";
import { FakeClock } from "../_fake_clock.ts";
import { cliProcess } from "../cli/_cli.ts";

Deno.test("an identity is made once and kept, with the key space it claimed", async () => {
  const dir = await tempDir("tierd-identity");
  try {
    const first = await ensureIdentity(dir.path, new FakeClock());
    assert.equal(first.created, true);
    assert.match(first.identity.agentId, /^[0-9a-f]{32}$/);
    const again = await ensureIdentity(dir.path, new FakeClock());
    assert.equal(again.created, false);
    assert.deepEqual(again.identity, first.identity);
    await saveIdentity(dir.path, {
      ...first.identity,
      keySpace: { prefix: "iggy", clusterId: "c1" },
    });
    assert.deepEqual((await loadIdentity(dir.path))?.keySpace, { prefix: "iggy", clusterId: "c1" });
  } finally {
    await dir.cleanup();
  }
});

Deno.test("a damaged agent.json is an IdentityError naming the file; run refuses with it", async () => {
  const dir = await tempDir("tierd-identity-bad");
  try {
    const path = join(dir.path, IDENTITY_FILE);
    const cases: [string, RegExp][] = [
      ["{not json", /not JSON/],
      [JSON.stringify({ kind: "tierd-agent", version: 2 }), /not a tierd agent identity/],
      [
        JSON.stringify({ kind: "tierd-agent", version: 1, agent_id: "short" }),
        /agent_id is not 32 hex digits/,
      ],
      [
        JSON.stringify({
          kind: "tierd-agent",
          version: 1,
          agent_id: "0123456789abcdef0123456789abcdef",
          key_space: { prefix: 3 },
        }),
        /key_space needs a prefix and a cluster_id/,
      ],
    ];
    for (const [text, why] of cases) {
      await writeFile(path, text);
      const err = await loadIdentity(dir.path).then(() => undefined, (e) => e);
      assert.ok(err instanceof IdentityError, text);
      assert.ok(err.message.startsWith(path), err.message);
      assert.match(err.message, why);
      // Never replaced by a fresh identity behind the operator's back.
      await assert.rejects(ensureIdentity(dir.path, new FakeClock()), IdentityError);
    }

    // The agent: exit 2, the file named, nothing written to the store.
    const root = dir.path;
    await writeFile(join(root, "tierd.toml"), testConfigText({ dir: root }));
    await generatePartition({
      format: "iggy-0.9",
      dataDir: join(root, "broker"),
      stream: 0,
      topic: 0,
      partition: 0,
      messages: 50,
      segmentSize: 4096,
    });
    await Deno.mkdir(join(root, "state"), { recursive: true });
    await writeFile(join(root, "state", IDENTITY_FILE), "{not json");
    const run = await cliProcess(["run", "--once", "--config", join(root, "tierd.toml")]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, new RegExp(`${join(root, "state", IDENTITY_FILE)}: not JSON`));
    const written = await readdir(join(root, "store", "objects"), { recursive: true })
      .catch(() => [] as string[]);
    assert.deepEqual(written, [], "nothing written to the store");
  } finally {
    await dir.cleanup();
  }
});
