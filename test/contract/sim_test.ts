// The contract suite against the in-memory simulator with its faults off.
import { SimStore } from "../../providers/sim/store.ts";
import { contractSuite } from "./suite.ts";

contractSuite(
  "sim",
  () => Promise.resolve({ store: new SimStore(), close: () => Promise.resolve() }),
  { checksum: "crc64nvme" },
);
