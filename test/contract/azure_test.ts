// The contract suite against a real Azurite through AzureStore, once authorized with the
// account's shared key and once with an account SAS. Without Azurite this is skipped with one
// loud line — and fails in CI.
import { AzureStore } from "../../providers/azure/store.ts";
import { findAzurite, startAzurite } from "../fixtures/azurite.ts";
import { accountSas } from "../providers/azure/_sas.ts";
import {
  type ContractCase,
  contractSuite,
  everyRangeOffThread,
  offThreadClose,
  RANGED_GET_CASES,
} from "./suite.ts";
import { announceSkip } from "../fixtures/_server.ts";

/**
 * Where Azure Blob itself (not the emulator) differs from the contract. Azurite behaves like
 * the real service here, so the assertion cannot pass against either.
 */
const exceptions: Partial<Record<ContractCase, string>> = {
  // Azure lists blob names in UTF-16 code-unit order, not UTF-8 byte order: a supplementary
  // character (a surrogate pair, e.g. U+1F600) sorts before U+E000..U+FFFF (e.g. U+FF5E), the
  // reverse of S3 and GCS. Observed on the real service by blobfile/blobfile#238 ("ordered by
  // UTF-16-BE"); Azurite compares JavaScript strings, the same order. The two orders agree on
  // all other strings, and tierd's keys are ASCII.
  "list-utf8-order":
    "Azure (service and Azurite) lists in UTF-16 code-unit order; supplementary characters sort before U+E000..U+FFFF",
};

const found = await findAzurite();
if ("reason" in found) {
  if (Deno.env.get("CI") === "true") throw new Error(`Azurite is required in CI: ${found.reason}`);
  announceSkip(`contract suite against Azurite: ${found.reason}`);
  Deno.test({
    name: `contract: azure on Azurite (skipped: ${found.reason})`,
    ignore: true,
    fn() {},
  });
} else {
  contractSuite("azure on Azurite, shared key", async () => {
    const azurite = (await startAzurite())!;
    const store = new AzureStore({
      account: azurite.account,
      container: azurite.container,
      endpoint: azurite.endpoint,
      sharedKey: azurite.key,
    });
    return { store, close: azurite.stop };
  }, { exceptions, checksum: "md5" });

  contractSuite("azure on Azurite, ranged GETs on fetch worker threads", async () => {
    const azurite = (await startAzurite())!;
    const workers = everyRangeOffThread();
    const store = new AzureStore({
      account: azurite.account,
      container: azurite.container,
      endpoint: azurite.endpoint,
      sharedKey: azurite.key,
      fetch: workers.fetch,
    });
    return { store, close: offThreadClose(workers, azurite.stop) };
  }, { exceptions, checksum: "md5", only: RANGED_GET_CASES });

  contractSuite("azure on Azurite, account SAS", async () => {
    const azurite = (await startAzurite())!;
    const store = new AzureStore({
      account: azurite.account,
      container: azurite.container,
      endpoint: azurite.endpoint,
      sasToken: await accountSas({ account: azurite.account, key: azurite.key }),
    });
    return { store, close: azurite.stop };
  }, { exceptions, checksum: "md5" });
}
