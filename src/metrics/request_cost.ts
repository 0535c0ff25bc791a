// What the store's requests cost, estimated from `tierd_store_requests_total` and a price table
// (`[tiered_storage.request_prices]`): writes (PUT, POST, LIST), reads (GET, HEAD) and deletes each
// at their price per 1,000. Every request sent counts, whatever its answer — stores bill refused
// requests too — so the estimate errs high.
import type { StoreOp } from "../../providers/decorate.ts";
import type { RequestPricesConfig } from "../config/schema.ts";
import { STORE_OPS, storeOutcomes } from "./instrument_store.ts";
import type { TierdMetrics } from "./tierd.ts";

/** The price class of each operation. */
const CLASS: Record<StoreOp, "write" | "read" | "delete"> = {
  put: "write",
  put_part: "write",
  create_multipart: "write",
  complete_multipart: "write",
  list: "write",
  list_multipart_uploads: "write",
  get: "read",
  head: "read",
  delete: "delete",
  abort_multipart: "delete",
};

/** Requests sent since start, and what they cost at `prices`. */
export interface RequestCost {
  requests: number;
  cost: number;
  currency: string;
}

/** The requests counted so far and their estimated cost. */
export function requestCost(metrics: TierdMetrics, prices: RequestPricesConfig): RequestCost {
  const per = {
    write: prices.write_per_1000 / 1000,
    read: prices.read_per_1000 / 1000,
    delete: prices.delete_per_1000 / 1000,
  };
  let requests = 0;
  let cost = 0;
  for (const op of STORE_OPS) {
    let n = 0;
    for (const outcome of storeOutcomes(op)) n += metrics.storeRequests.value({ op, outcome });
    requests += n;
    cost += n * per[CLASS[op]];
  }
  return { requests, cost, currency: prices.currency };
}
