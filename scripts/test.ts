// `deno task test`: runs the suite and the examples in the JSDoc of src/ and providers/
// (`deno test -A --parallel --doc test/ src/ providers/`, or the paths given), then says at the
// very end what did not run. A suite whose server or tool is missing skips with one loud line,
// somewhere among a thousand; here every such line is gathered (the fixtures write them to the
// file named in TIERD_TEST_SKIPS) and repeated after Deno's own summary, so a run without MinIO
// or promtool cannot pass for a whole one. The exit code is the test run's.
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const skips = join(tmpdir(), `tierd-test-skips-${Deno.pid}.txt`);
await rm(skips, { force: true });
// With --doc every fenced `@example` in those files is type-checked and run as a test (a block
// marked ```ts ignore is skipped), so an example cannot go stale unnoticed.
const paths = Deno.args.length > 0 ? Deno.args : ["test/", "src/", "providers/"];
const run = new Deno.Command(Deno.execPath(), {
  args: ["test", "-A", "--parallel", "--doc", ...paths],
  env: { TIERD_TEST_SKIPS: skips },
  stdin: "inherit",
  stdout: "inherit",
  stderr: "inherit",
}).spawn();
const status = await run.status;
const lines = (await readFile(skips, "utf8").catch(() => "")).split("\n").filter((l) => l !== "");
await rm(skips, { force: true });
if (lines.length > 0) {
  const unique = [...new Set(lines)].sort();
  console.error(
    `\n!!!!! ${unique.length} suite(s) did not run here (bash scripts/install-test-servers.sh ` +
      `installs their servers into ~/.cache/tierd):`,
  );
  for (const line of unique) console.error(`  - ${line}`);
}
Deno.exit(status.code);
