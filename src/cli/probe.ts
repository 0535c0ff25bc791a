// `tierd probe`: the boot probe alone — one-key LIST against the configured store — and which
// credential source answered, and why the others in the chain were skipped.
import { systemClock } from "../../providers/clock.ts";
import { describeCredentials, probeStore } from "../../providers/probe.ts";
import { parseFlags } from "./args.ts";
import { loadContext, storeFor } from "./context.ts";

/** Runs `tierd probe`: 0 when the store answers a one-key LIST, else 1 with the reason. */
export async function probeCommand(args: string[]): Promise<number> {
  const { values } = parseFlags(args, {});
  const ctx = await loadContext(values.config);
  const opened = await storeFor(ctx);
  const { store, prefix, describe } = opened;
  const credentialLines = () => {
    const lines = opened.credentials
      ? describeCredentials(opened.credentials(), systemClock.now())
      : [];
    if (opened.regionFrom) lines.push(`region from ${opened.regionFrom}`);
    return lines;
  };
  try {
    const result = await probeStore(store, prefix);
    if (!result.ok) {
      // One line: the reason, then the chain (which source answered, why others were skipped).
      const chain = credentialLines().map((l) => l.trim()).join("; ");
      console.error(
        ctx.scrub(
          `tierd: probe failed: ${describe}: ${result.reason}${chain ? ` [${chain}]` : ""}`,
        ),
      );
      return 1;
    }
    console.log(`probe ok: ${describe}, prefix "${prefix}"`);
    console.log(ctx.scrub(credentialLines().join("\n")));
    return 0;
  } finally {
    await store.close?.();
  }
}
