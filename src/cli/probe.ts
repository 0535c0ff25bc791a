// `tierd probe`: the boot probe alone — one-key LIST against the configured store, for S3 with
// `checksum = "auto"` the checksum it settles on and how copies will be proven, then on a probe
// key what the agent will do (put, conditional create, head, ranged get, multipart upload,
// delete) — and which credential source answered, and why the others in the chain were skipped.
import { systemClock } from "../base/clock.ts";
import { describeCredentials, probeStore } from "../../providers/probe.ts";
import { describeChecksumWay } from "../../providers/s3/checksum_way.ts";
import { S3Store } from "../../providers/s3/store.ts";
import { probeSpace } from "../layout/probe_space.ts";
import { access, constants, stat } from "node:fs/promises";
import { dirname } from "node:path";
import { type Command, CONFIG_FLAG, type ParsedArgs } from "./args.ts";
import { loadContext, storeFor } from "./context.ts";

/** `tierd probe [--config F]`: 0 when the store answers a one-key LIST, else 1 with the reason. */
export const probeCommand: Command = {
  spec: {
    name: "probe",
    summary: "check the object store: LIST, then what the agent writes, and why it failed",
    description:
      "Sends the agent's boot probe (a LIST of at most one key under the prefix, then\n" +
      "put, conditional create, head, ranged get, a one-part multipart upload and delete on a\n" +
      "probe key under .tierd-probe/) and says in one line what is wrong: the endpoint, the\n" +
      "credentials, the bucket, the region, or the step refused and the setting that fixes it;\n" +
      "then which credential source answered and why the others were skipped.",
    flags: { config: CONFIG_FLAG },
  },
  run: probe,
};

async function probe({ values }: ParsedArgs): Promise<number> {
  const ctx = await loadContext(values.config, { uses: ["store"] });
  if (ctx.config.tiered_storage.backend === "fs") {
    // Opening an fs store creates its directory: a mistyped path must be said, not made.
    const absent = await fsStoreAbsent(ctx.config.tiered_storage.fs.path);
    if (absent) {
      const line = `fs store at ${ctx.config.tiered_storage.fs.path}: ${absent.text}`;
      if (!absent.ok) {
        console.error(`tierd: probe failed: ${line}`);
        return 1;
      }
      console.log(`probe ok: ${line}`);
      return 0;
    }
  }
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
    const result = await probeStore(store, prefix, {
      writes: true,
      space: probeSpace(ctx.config.agent.state_dir, "cli"),
    });
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
    for (const warning of result.warnings ?? []) console.log(`warning: ${warning}`);
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

/**
 * What is wrong with an fs store's directory before anything opens it, if anything: it does not
 * exist yet (fine when the closest directory that does is writable: `tierd run` creates it), or
 * it is not a directory.
 */
async function fsStoreAbsent(path: string): Promise<{ ok: boolean; text: string } | undefined> {
  const found = await stat(path).catch(() => undefined);
  if (found?.isDirectory()) return undefined;
  if (found) return { ok: false, text: "it is not a directory" };
  let parent = dirname(path);
  while (
    !(await stat(parent).catch(() => undefined))?.isDirectory() && parent !== dirname(parent)
  ) {
    parent = dirname(parent);
  }
  const writable = await access(parent, constants.W_OK).then(() => true, () => false);
  return writable
    ? {
      ok: true,
      text: `does not exist yet: tierd run creates it under ${parent} (check the path if it ` +
        "should exist already)",
    }
    : { ok: false, text: `does not exist, and ${parent} is not writable to create it` };
}
