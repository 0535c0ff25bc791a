// The contract suite against a real fake-gcs-server through GcsStore (JSON API, no token).
// Without a binary this is skipped with one loud line — and fails in CI.
import { NoTokenSource } from "../../providers/gcs/credentials.ts";
import { GcsStore } from "../../providers/gcs/store.ts";
import { findFakeGcs, startFakeGcs } from "../fixtures/fake_gcs.ts";
import { contractSuite, everyRangeOffThread, offThreadClose, RANGED_GET_CASES } from "./suite.ts";
import { announceSkip } from "../fixtures/_server.ts";

const found = await findFakeGcs();
if ("reason" in found) {
  if (Deno.env.get("CI") === "true") {
    throw new Error(`fake-gcs-server is required in CI: ${found.reason}`);
  }
  announceSkip(`contract suite against fake-gcs-server: ${found.reason}`);
  Deno.test({
    name: `contract: gcs on fake-gcs-server (skipped: ${found.reason})`,
    ignore: true,
    fn() {},
  });
} else {
  contractSuite("gcs on fake-gcs-server", async () => {
    const server = (await startFakeGcs())!;
    const store = new GcsStore({
      bucket: server.bucket,
      endpoint: server.endpoint,
      tokens: new NoTokenSource(),
      // fake-gcs-server 1.56 ignores ifGenerationMatch on compose (and rewrite): it would
      // overwrite. Real GCS answers 412 there, which the default "precondition" relies on (see
      // test/providers/gcs). "head" looks first and still sends the precondition.
      conditionalCompose: "head",
    });
    return { store, close: server.stop };
  }, { checksum: "crc32c" });

  contractSuite("gcs on fake-gcs-server, ranged GETs on fetch worker threads", async () => {
    const server = (await startFakeGcs())!;
    const workers = everyRangeOffThread();
    const store = new GcsStore({
      bucket: server.bucket,
      endpoint: server.endpoint,
      tokens: new NoTokenSource(),
      conditionalCompose: "head",
      fetch: workers.fetch,
    });
    return { store, close: offThreadClose(workers, server.stop) };
  }, { checksum: "crc32c", only: RANGED_GET_CASES });
}
