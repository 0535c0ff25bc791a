// `tierd probe`: the boot probe alone — one-key LIST against the configured store.
import { probeStore } from "../../providers/probe.ts";
import { type Command, CONFIG_FLAG, type ParsedArgs } from "./args.ts";
import { loadContext, storeFor } from "./context.ts";

/** `tierd probe [--config F]`: 0 when the store answers a one-key LIST, else 1 with the reason. */
export const probeCommand: Command = {
  spec: {
    name: "probe",
    summary: "check the object store: one-key LIST, and why it failed",
    description: "Sends the agent's boot probe (a LIST of at most one key under the prefix) and\n" +
      "says in one line what is wrong: the endpoint, the credentials, the bucket or the region.",
    flags: { config: CONFIG_FLAG },
  },
  run: probe,
};

async function probe({ values }: ParsedArgs): Promise<number> {
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
