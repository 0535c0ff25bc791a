// `tierd restore [--stream S --topic T --partition P] [--cluster-id C] [--with-data]
// [--incarnation I --generation G] [--accept-holes]`: rebuild `state_dir` from the bucket on a new
// host (and, with data, the broker's partition directories), with progress on stderr. Takes the
// state dir lock like `run`, and takes the key space over (the old owner is fenced) before it
// writes anything. Exit 0 when every partition came back whole, 1 when any has a hole, competes,
// or failed (each said on its own line), 2 for what the operator must fix first.
import { systemClock } from "../base/clock.ts";
import type { ListingProgress } from "../../providers/listing.ts";
import { probeStore } from "../../providers/probe.ts";
import { RetryingStore } from "../../providers/retrying_store.ts";
import { humanSize } from "../config/units.ts";
import { keySpaceRoot } from "../layout/key_space.ts";
import { describeOwner } from "../ownership/owner_record.ts";
import { claimKeySpace, KeySpaceMismatch } from "../ownership/claim.ts";
import { IdentityError } from "../ownership/identity.ts";
import { OwnerRecordError } from "../ownership/owner_record.ts";
import { describeHole } from "../restore/holes.ts";
import {
  type PartitionRestore,
  partitionsToRestore,
  restore,
  RestoreRefused,
} from "../restore/restore.ts";
import { lockStateDir } from "../runtime/state_lock.ts";
import {
  type Command,
  CONFIG_FLAG,
  filterAccepts,
  type ParsedArgs,
  PARTITION_FLAGS,
  type PartitionFilter,
  partitionFilter,
  UsageError,
} from "./args.ts";
import { loadContext, storeFor } from "./context.ts";
import { Progress } from "./progress.ts";

/** `tierd restore`: 0 when every partition was restored whole, 1 otherwise. */
export const restoreCommand: Command = {
  spec: {
    name: "restore",
    summary: "rebuild state_dir from the bucket on a new host (--with-data: the broker's too)",
    description: "Lists the objects tierd wrote for this cluster and rebuilds each partition's\n" +
      "journal, markers and index copies in agent.state_dir, taking the state dir lock as\n" +
      "`tierd run` does (stop the agent first). This host's agent becomes the key space's\n" +
      "owner: a previous owner still running is fenced and stops writing. Which incarnation\n" +
      "and generation is a partition's is decided by evidence (its owner's manifests and\n" +
      "tombstones), never by date; when several compete they are listed and that partition is\n" +
      "left alone: name one with --incarnation and --generation. Every good segment is\n" +
      "restored; each hole is reported and read as a gap until it is settled (the object\n" +
      "repaired and restore run again, or --accept-holes). Progress goes to stderr.",
    flags: {
      config: CONFIG_FLAG,
      ...PARTITION_FLAGS,
      "cluster-id": {
        type: "string",
        value: "C",
        help: "restore this cluster's objects (default agent.cluster_id)",
      },
      "with-data": {
        type: "boolean",
        help: "also download the segments into the broker's partition directories",
      },
      incarnation: {
        type: "string",
        value: "I",
        help: "the incarnation to restore (16 hex digits), with --stream/--topic/--partition",
      },
      generation: {
        type: "string",
        value: "G",
        help: "the generation to restore, with --stream/--topic/--partition",
      },
      "accept-holes": {
        type: "boolean",
        help: "record every hole as lost: reads skip it and eviction goes on past it",
      },
    },
  },
  run: restoreState,
};

async function restoreState({ values }: ParsedArgs): Promise<number> {
  const only = partitionFilter(values);
  const named = namedCandidate(values, only);
  const ctx = await loadContext(values.config, { uses: ["store"] });
  const { config, logger } = ctx;
  const clusterId = typeof values["cluster-id"] === "string"
    ? values["cluster-id"]
    : config.agent.cluster_id;
  await lockStateDir(config.agent.state_dir, "tierd restore");
  const opened = await storeFor(ctx);
  const fail = (code: number, text: string) => {
    console.error(ctx.scrub(`tierd: ${text}`));
    return code;
  };
  try {
    const probe = await probeStore(opened.store, opened.prefix);
    if (!probe.ok) return fail(1, `probe failed: ${opened.describe}: ${probe.reason}`);
    const store = new RetryingStore(opened.store, {
      clock: systemClock,
      maxBackoffMs: config.tiered_storage.upload_loop_backoff_max,
    });
    const keySpace = { prefix: opened.prefix, clusterId };
    const listings = new ListingLines();
    const options = {
      config,
      store,
      keySpace,
      clock: systemClock,
      logger,
      describe: opened.describe,
      withData: values["with-data"] === true,
      acceptHoles: values["accept-holes"] === true,
      named,
      filter: (id: { stream: number; topic: number; partition: number }) => filterAccepts(only, id),
      listing: (what: string, p: ListingProgress) => listings.update(what, p),
    };
    const ids = await partitionsToRestore(options);
    listings.end();
    if (ids.length === 0) {
      return fail(
        1,
        `nothing to restore under ${opened.describe} for key space ${keySpaceRoot(keySpace)}`,
      );
    }
    // Before anything is written: this host's agent becomes the owner; an old one is fenced.
    const held = await claimKeySpace({
      stateDir: config.agent.state_dir,
      keySpace,
      store,
      describe: opened.describe,
      clock: systemClock,
      logger,
      takeOver: true,
    });
    if (held.outcome.kind === "taken-over") {
      console.error(
        `took over key space ${keySpaceRoot(keySpace)} from ${
          describeOwner(held.outcome.from)
        }: that agent is fenced and stops writing there`,
      );
    }
    const progress = new Map<string, Progress>();
    const results = await restore({
      ...options,
      lineage: held.lease.lineage(),
      progress: (partition, done, segment, partial) => {
        listings.end();
        let p = progress.get(partition);
        if (!p) {
          progress.set(partition, p = new Progress(`restore ${partition}`, { unit: "segments" }));
        }
        p.update(
          {
            done: done.segments,
            total: done.total,
            bytesDone: done.bytes,
            bytesTotal: done.totalBytes,
          },
          `segment ${segment}`,
          { partial },
        );
      },
    }, ids);
    listings.end();
    for (const p of progress.values()) p.end();
    for (const r of results) for (const line of summary(r)) console.error(ctx.scrub(line));
    const whole = results.every((r) => r.outcome === "restored" || r.outcome === "nothing");
    const counts = new Map<string, number>();
    for (const r of results) counts.set(r.outcome, (counts.get(r.outcome) ?? 0) + 1);
    console.error(
      `restore ${whole ? "complete" : "INCOMPLETE"}: ${
        [...counts].map(([k, n]) => `${n} ${k}`).join(", ")
      }`,
    );
    return whole ? 0 : 1;
  } catch (err) {
    if (
      err instanceof RestoreRefused || err instanceof KeySpaceMismatch ||
      err instanceof IdentityError || err instanceof OwnerRecordError
    ) {
      return fail(2, err.message);
    }
    throw err;
  } finally {
    await opened.store.close?.();
  }
}

/** `--incarnation` / `--generation`, which name one partition's choice. */
function namedCandidate(
  values: ParsedArgs["values"],
  only: PartitionFilter,
): { incarnation?: bigint; generation?: bigint } | undefined {
  const inc = values.incarnation;
  const gen = values.generation;
  if (inc === undefined && gen === undefined) return undefined;
  if (only.stream === undefined || only.topic === undefined || only.partition === undefined) {
    throw new UsageError(
      "--incarnation and --generation choose for one partition: give --stream, --topic and " +
        "--partition too",
    );
  }
  const out: { incarnation?: bigint; generation?: bigint } = {};
  if (inc !== undefined) {
    if (typeof inc !== "string" || !/^[0-9a-fA-F]{1,16}$/.test(inc)) {
      throw new UsageError(`--incarnation ${String(inc)}: expected up to 16 hex digits`);
    }
    out.incarnation = BigInt("0x" + inc);
  }
  if (gen !== undefined) {
    if (typeof gen !== "string" || !/^(0|[1-9][0-9]{0,19})$/.test(gen)) {
      throw new UsageError(`--generation ${String(gen)}: expected a non-negative integer`);
    }
    out.generation = BigInt(gen);
  }
  return out;
}

/** What one partition's restore says on stderr: a line, then one per hole or candidate. */
function summary(r: PartitionRestore): string[] {
  const where = r.incarnation === undefined
    ? ""
    : ` (incarnation ${
      r.incarnation.toString(16).padStart(16, "0")
    } generation ${r.generation}, ${r.chosen})`;
  switch (r.outcome) {
    case "restored":
    case "partial": {
      const withData = r.downloaded + r.kept > 0;
      const lines = [
        `restored ${r.partition}${where}: ${r.segments} segments (${humanSize(r.bytes)}), ` +
        `${r.downloaded} downloaded, ${r.kept} already in place` +
        (r.holes.length > 0
          ? `; ${r.holes.length} HOLE(S)${r.accepted > 0 ? `, ${r.accepted} recorded lost` : ""}`
          : ""),
      ];
      if (r.activeStart !== undefined) {
        lines.push(
          `  ${r.partition}: an empty segment at offset ${r.activeStart} after the restored ones: ` +
            "the broker appends there",
        );
      } else if (withData) {
        lines.push(
          `  ${r.partition}: no empty segment after the restored ones (the bucket lacks offsets ` +
            "after them): a broker started now appends to the last",
        );
      }
      for (const h of r.holes) lines.push(`  hole in ${r.partition}: ${describeHole(h)}`);
      for (const u of r.unfinished) {
        lines.push(`  unfinished copy in ${r.partition}, ignored (not a hole): ${u}`);
      }
      if (r.holes.length > r.accepted) {
        lines.push(
          `  reads answer each hole as a gap and nothing after it is evicted; repair the ` +
            `objects and run restore again, or record the loss with --accept-holes`,
        );
      }
      return lines;
    }
    case "competing": {
      const [stream, topic, partition] = r.partition.split("/");
      return [
        `NOT restored ${r.partition}: ${r.competing.length} incarnations or generations compete:`,
        ...r.competing.map((c) => `  ${c}`),
        `  name one: tierd restore --stream ${stream} --topic ${topic} --partition ${partition} ` +
        "--incarnation I --generation G",
      ];
    }
    case "nothing":
      return [
        `nothing restored for ${r.partition}: the bucket holds no candidate of this key space`,
        ...r.excluded.map((e) => `  ${e}`),
      ];
    case "failed":
      return [`FAILED ${r.partition}: ${r.error}; run restore again`];
  }
}

/** Listing progress on stderr: pages and keys, one rewritten line per listing. */
class ListingLines {
  #current?: string;
  #last = 0;

  update(what: string, p: ListingProgress): void {
    const tty = Boolean(process.stderr.isTTY);
    if (what !== this.#current) this.end();
    this.#current = what;
    const line = `listing ${what}: ${p.pages} pages, ${p.keys} keys`;
    if (tty) process.stderr.write(`\r${line}\x1b[K`);
    else if (p.pages - this.#last >= 10 || p.pages === 1) {
      this.#last = p.pages;
      process.stderr.write(`${line}\n`);
    }
  }

  end(): void {
    if (this.#current !== undefined && process.stderr.isTTY) process.stderr.write("\n");
    this.#current = undefined;
    this.#last = 0;
  }
}
