// `tierd probe` of an fs store says what is wrong with its directory and creates nothing: a
// mistyped path is reported as not existing yet (tierd run would create it), a file where the
// directory should be fails; an existing store is probed as usual.
import assert from "node:assert/strict";
import { mkdir, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { testConfigText } from "../_config.ts";
import { tempDir } from "../_util.ts";
import { cli } from "./_cli.ts";

Deno.test("probe of an fs store: a missing directory is said, never made; a file is refused", async () => {
  const tmp = await tempDir("tierd-probe-fs");
  try {
    const config = join(tmp.path, "tierd.toml");
    const text = testConfigText({ dir: tmp.path });
    await writeFile(config, text.replace(`${tmp.path}/store`, `${tmp.path}/stroe/typo`));
    const missing = await cli(["probe", "--config", config]);
    assert.equal(missing.code, 0, missing.stderr);
    assert.match(missing.stdout, /stroe\/typo: does not exist yet: tierd run creates it under /);
    assert.ok(!(await readdir(tmp.path)).includes("stroe"), "the probe created the directory");

    await writeFile(join(tmp.path, "file"), "not a directory");
    await writeFile(config, text.replace(`${tmp.path}/store`, `${tmp.path}/file`));
    const file = await cli(["probe", "--config", config]);
    assert.equal(file.code, 1);
    assert.match(file.stderr, /probe failed: fs store at .*file: it is not a directory/);

    await mkdir(join(tmp.path, "store"));
    await writeFile(config, text);
    const ok = await cli(["probe", "--config", config]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^probe ok: fs store at /);
  } finally {
    await tmp.cleanup();
  }
});
