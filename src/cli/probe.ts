// `tierd probe`: the boot probe alone — one-key LIST against the configured store.
import { probeStore } from "../../providers/probe.ts";
import { loadContext, storeFor } from "./context.ts";
import { parseFlags } from "./main.ts";

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
