// `tierd probe`: the boot probe alone — one-key LIST against the configured store, and for S3
// with `checksum = "auto"` the checksum it settles on and how copies will be proven — and which
// credential source answered, and why the others in the chain were skipped.
import { systemClock } from "../../providers/clock.ts";
import { describeCredentials, probeStore } from "../../providers/probe.ts";
import { describeChecksumWay } from "../../providers/s3/checksum_way.ts";
import { S3Store } from "../../providers/s3/store.ts";
import { type Command, CONFIG_FLAG, type ParsedArgs } from "./args.ts";
import { loadContext, storeFor } from "./context.ts";

/** `tierd probe [--config F]`: 0 when the store answers a one-key LIST, else 1 with the reason. */
export const probeCommand: Command = {
  spec: {
    name: "probe",
    summary: "check the object store: one-key LIST, and why it failed",
    description: "Sends the agent's boot probe (a LIST of at most one key under the prefix) and\n" +
      "says in one line what is wrong: the endpoint, the credentials, the bucket or the region,\n" +
      "and which credential source answered and why the others were skipped.",
    flags: { config: CONFIG_FLAG },
  },
  run: probe,
};

async function probe({ values }: ParsedArgs): Promise<number> {
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
    if (store instanceof S3Store && store.checksumReport) {
      console.log(describeChecksumWay(store.checksumReport));
    } else if (ctx.config.tiered_storage.backend === "s3") {
      console.log(`checksum ${ctx.config.tiered_storage.s3.checksum} (configured)`);
    }
    console.log(ctx.scrub(credentialLines().join("\n")));
    return 0;
  } finally {
    await store.close?.();
  }
}
