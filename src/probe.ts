// The boot probe (DESIGN §8): one-key LIST under the prefix, turned into a one-line verdict.
import { type ObjectStore, StoreError } from "../providers/types.ts";

export type ProbeResult = { ok: true } | { ok: false; reason: string };

/** Lists at most one key under `prefix`; explains a failure in one line. */
export async function probeStore(
  store: ObjectStore,
  prefix: string,
  signal?: AbortSignal,
): Promise<ProbeResult> {
  try {
    await store.list(prefix === "" ? "" : prefix.replace(/\/*$/, "/"), { maxKeys: 1, signal });
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: explain(err) };
  }
}

function explain(err: unknown): string {
  if (!(err instanceof StoreError)) return err instanceof Error ? err.message : String(err);
  const code = err.detail.code ? ` (${err.detail.code})` : "";
  switch (err.kind) {
    case "Auth":
      return `credentials refused${code}: ${err.message}`;
    case "NotFound":
      return `bucket or container not found${code}: ${err.message}`;
    case "Transport":
      return `endpoint unreachable${code}: ${err.message}`;
    case "Throttled":
      return `store is throttling requests${code}: ${err.message}`;
    default:
      return `${err.kind}${code}: ${err.message}`;
  }
}
