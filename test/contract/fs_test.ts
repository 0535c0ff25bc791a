// The contract suite against the filesystem store, in a fresh temporary directory.
import { FsStore } from "../../providers/fs/store.ts";
import { tempDir } from "../_util.ts";
import { contractSuite } from "./suite.ts";

contractSuite("fs", async () => {
  const dir = await tempDir("tierd-contract-fs");
  return { store: new FsStore({ root: dir.path }), close: dir.cleanup };
}, { checksum: "crc32" }); // it hashes its file on a HEAD that asks
