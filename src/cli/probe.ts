// `tierd probe`: the boot probe alone — one-key LIST against the configured store.
import { probeStore } from "../../providers/probe.ts";
import { parseFlags } from "./args.ts";
import { loadContext, storeFor } from "./context.ts";

/** Runs `tierd probe`: 0 when the store answers a one-key LIST, else 1 with the reason. */
export async function probeCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, {});
  const ctx = await loadContext(values.config);
  const { store, prefix, describe } = await storeFor(ctx);
  try {
    const result = await probeStore(store, prefix);
    if (!result.ok) {
      console.error(`tierd: probe failed: ${describe}: ${result.reason}`);
      return 1;
    }
    console.log(`probe ok: ${describe}, prefix "${prefix}"`);
    return 0;
  } finally {
    await store.close?.();
  }
}
