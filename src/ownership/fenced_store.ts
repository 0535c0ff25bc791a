// The store as the tier worker sees it: every call that changes the bucket first proves that
// this agent still owns its key space (lease.ts), by a read of the owner record. Reads pass
// untouched. Once the key space
// was taken over, every write and delete fails with `KeySpaceFenced` and nothing more is sent.
import { decorateStore, type StoreOp } from "../../providers/decorate.ts";
import type { ObjectStore } from "../../providers/types.ts";
import type { KeySpaceLease } from "./lease.ts";

/** What each operation asks of the lease before it runs. */
const GUARD: Partial<Record<StoreOp, "write" | "delete">> = {
  put: "write",
  create_multipart: "write",
  complete_multipart: "write",
  delete: "delete",
  abort_multipart: "delete",
};

/**
 * Wraps `inner` so writes and deletes run only while `lease` holds the key space.
 * @example
 * ```ts ignore
 * const store = fencedStore(instrumented, lease);
 * ```
 */
export function fencedStore(inner: ObjectStore, lease: KeySpaceLease): ObjectStore {
  return decorateStore(inner, async (call) => {
    const guard = GUARD[call.op];
    if (guard) await lease.assertOwner(guard);
    return await call.run(call.signal);
  });
}
