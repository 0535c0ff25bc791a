// `tierd verify`: an on-demand check of what tierd's journals say against what the bucket and the
// broker's directories hold, like `rclone check` (./verify_partition.ts says what is checked and
// how). Read-only everywhere: the store is wrapped so it cannot be written, the journals are read
// as `ls` reads them and the state dir lock is not taken, so it runs beside a running agent.
// Exit 0 when everything matches, 1 on any difference, 2 for bad usage or configuration.
import { systemClock } from "../base/clock.ts";
import { readOnlyStore } from "../../providers/read_only_store.ts";
import { RetryingStore } from "../../providers/retrying_store.ts";
import { TokenBucket } from "../cache/token_bucket.ts";
import { humanSize } from "../config/units.ts";
import { sameKeySpace } from "../layout/key_space.ts";
import { KeySpaceMismatch } from "../ownership/claim.ts";
import { IdentityError, loadIdentity } from "../ownership/identity.ts";
import { JournalStateReader } from "../read/state_source.ts";
import {
  type Command,
  CONFIG_FLAG,
  intFlag,
  type ParsedArgs,
  PARTITION_FLAGS,
  partitionFilter,
  UsageError,
} from "./args.ts";
import { loadContext, storeFor } from "./context.ts";
import { tieredPartitions } from "./inventory.ts";
import { Progress } from "./progress.ts";
import { renderTable } from "./table.ts";
import {
  copiesToCheck,
  DIFFERENCES,
  type PartitionVerify,
  type VerifyFinding,
  verifyPartition,
  type VerifyStatus,
} from "./verify_partition.ts";

/** Copies checked at once unless `--checkers` says otherwise. */
export const DEFAULT_CHECKERS = 8;

/** `tierd verify`: 0 when the bucket and the local files are as the journals say, 1 otherwise. */
export const verifyCommand: Command = {
  spec: {
    name: "verify",
    summary: "check the bucket and the local segments against the journals (changes nothing)",
    description:
      "For every tiered partition (or those --stream/--topic/--partition select), checks each\n" +
      "copy the journal calls verified: its .log and .index objects are there with the recorded\n" +
      "size and metadata, and, while the segment is still on local disk, the local file still\n" +
      "hashes to what was copied and the store's own checksum of the object is the local file's\n" +
      "(else the object is read back). --deep reads every copy back and compares its XXH3-128\n" +
      "instead of trusting a stored checksum. Objects under a partition's keys that the journal\n" +
      "does not know are reported as orphans and never deleted. Segments the journal records as\n" +
      "lost or as holes are listed as such, not as differences.\n\n" +
      "Nothing is written: not the bucket, not the journals, not the broker's files; the state\n" +
      "dir lock is not taken, so it runs beside a running agent (a record the agent changes\n" +
      "meanwhile is reported as changed). Exit 0 when everything matches, 1 on any difference\n" +
      "(missing, size, metadata, checksum, local-changed, orphan, unreadable) or store error.",
    flags: {
      config: CONFIG_FLAG,
      ...PARTITION_FLAGS,
      deep: {
        type: "boolean",
        help:
          "read every copy back (paced by fetch_bandwidth) instead of trusting stored checksums",
      },
      checkers: {
        type: "string",
        value: "N",
        help: `copies checked at once (default ${DEFAULT_CHECKERS})`,
      },
      all: { type: "boolean", help: "list every segment checked, not only what needs a look" },
      json: {
        type: "boolean",
        help: "every finding as JSON (partition, segment, end, status, location, key, detail)",
      },
    },
  },
  run: verify,
};

async function verify({ values }: ParsedArgs): Promise<number> {
  const filter = partitionFilter(values);
  const checkers = intFlag(values, "checkers", DEFAULT_CHECKERS);
  if (checkers < 1) throw new UsageError("--checkers must be at least 1");
  const deep = values.deep === true;
  const ctx = await loadContext(values.config, { uses: ["store"] });
  const { config } = ctx;
  const fail = (code: number, text: string) => {
    console.error(ctx.scrub(`tierd: ${text}`));
    return code;
  };
  const journals = new JournalStateReader(config.agent.state_dir);
  const parts = await tieredPartitions(config, filter, journals);
  if (parts.length === 0) {
    console.log(
      values.json
        ? JSON.stringify({ matches: true, differences: 0, counts: {}, checked: 0, findings: [] })
        : `no tiered partitions under ${config.agent.data_dir} or ${config.agent.state_dir}`,
    );
    return 0;
  }
  const opened = await storeFor(ctx);
  try {
    const keySpace = { prefix: opened.prefix, clusterId: config.agent.cluster_id };
    // Read, never made: the identity names the key space this state dir's copies live under.
    const identity = await loadIdentity(config.agent.state_dir);
    if (identity?.keySpace && !sameKeySpace(identity.keySpace, keySpace)) {
      throw new KeySpaceMismatch(config.agent.state_dir, identity.keySpace, keySpace);
    }
    const retrying = new RetryingStore(opened.store, {
      clock: systemClock,
      maxBackoffMs: config.tiered_storage.upload_loop_backoff_max,
    });
    const store = readOnlyStore(retrying.within(retrying.root));
    const total = parts.reduce((n, p) => n + copiesToCheck(p.state).length, 0);
    const progress = process.stderr.isTTY
      ? new Progress(deep ? "verify --deep" : "verify", { unit: "copies" })
      : undefined;
    let done = 0;
    let bytes = 0;
    const env = {
      store,
      keySpace,
      format: config.agent.format === "auto" ? undefined : config.agent.format,
      deep,
      checkers,
      bandwidth: new TokenBucket(config.tiered_storage.fetch_bandwidth, { clock: systemClock }),
      journals,
      clock: systemClock,
      quiescenceMs: config.agent.seal_quiescence,
      onChecked: (partition: string, segment: bigint, read: number) => {
        done++;
        bytes += read;
        progress?.update({ done, total, bytesDone: bytes }, `${partition} segment ${segment}`);
      },
    };
    const results: PartitionVerify[] = [];
    for (const part of parts) {
      try {
        results.push(await verifyPartition(env, part));
      } catch (err) {
        // The partition's objects could not be listed: said, and the others checked.
        results.push({
          partition: part.label,
          findings: [{
            partition: part.label,
            status: "error",
            location: "-",
            detail: `could not check: ${(err as Error).message}`,
          }],
          checked: 0,
          notCopied: 0,
          bytesRead: 0,
        });
      }
    }
    progress?.end();
    const findings = results.flatMap((r) => r.findings);
    const differences = findings.filter((f) => DIFFERENCES.has(f.status)).length;
    if (values.json) {
      console.log(JSON.stringify(
        {
          matches: differences === 0,
          differences,
          counts: countByStatus(findings),
          checked: sum(results, (r) => r.checked),
          not_copied: sum(results, (r) => r.notCopied),
          bytes_read: sum(results, (r) => r.bytesRead),
          findings: findings.map(findingJson),
        },
        null,
        2,
      ));
    } else {
      const shown = values.all ? findings : findings.filter((f) => f.status !== "ok");
      if (shown.length > 0) console.log(ctx.scrub(findingTable(shown)) + "\n");
      console.log(summary(results, findings, deep));
    }
    return differences === 0 ? 0 : 1;
  } catch (err) {
    if (err instanceof KeySpaceMismatch || err instanceof IdentityError) {
      return fail(2, err.message);
    }
    throw err;
  } finally {
    await opened.store.close?.();
  }
}

/** The findings as a table: where, what, and what it means. */
export function findingTable(findings: readonly VerifyFinding[]): string {
  return renderTable(
    ["PARTITION", "SEGMENT", "END", "STATUS", "LOCATION", "DETAIL"],
    findings.map((f) => [
      f.partition,
      f.segment === undefined ? "-" : f.segment.toString(),
      f.end === undefined ? "" : f.end.toString(),
      f.status,
      f.location,
      f.key !== undefined && !ABOUT_LOCAL.has(f.status)
        ? `${objectName(f.partition, f.key)}: ${f.detail}`
        : f.detail,
    ]),
    ["left", "right", "right", "left", "left", "left"],
  );
}

/** Statuses whose detail is about the local file or the journal, not about an object. */
const ABOUT_LOCAL: ReadonlySet<VerifyStatus> = new Set<VerifyStatus>([
  "local-changed",
  "lost",
  "hole",
  "in-progress",
  "changed",
]);

/** A key below its partition's root (`{incarnation}-{generation}/{start}.log`), else whole. */
function objectName(partition: string, key: string): string {
  const at = key.indexOf(`/${partition}/`);
  return at < 0 ? key : key.slice(at + partition.length + 2);
}

/** The closing lines: what was checked, the counts by status, and the verdict. */
function summary(
  results: readonly PartitionVerify[],
  findings: readonly VerifyFinding[],
  deep: boolean,
): string {
  const counts = countByStatus(findings);
  const differences = findings.filter((f) => DIFFERENCES.has(f.status)).length;
  const listed = Object.entries(counts).filter(([status]) => status !== "ok")
    .map(([status, n]) => `${n} ${status}`);
  const notCopied = sum(results, (r) => r.notCopied);
  return [
    `verify${deep ? " --deep" : ""}: ${results.length} partition(s), ` +
    `${sum(results, (r) => r.checked)} copies checked, ${counts.ok ?? 0} ok` +
    (listed.length > 0 ? `, ${listed.join(", ")}` : "") +
    `; ${humanSize(sum(results, (r) => r.bytesRead))} read` +
    (notCopied > 0 ? `; ${notCopied} local segment(s) not copied yet` : ""),
    differences === 0
      ? "verify: everything matches"
      : `verify: ${differences} DIFFERENCE(S); nothing was changed`,
  ].join("\n");
}

function countByStatus(findings: readonly VerifyFinding[]): Partial<Record<VerifyStatus, number>> {
  const out: Partial<Record<VerifyStatus, number>> = {};
  for (const f of findings) out[f.status] = (out[f.status] ?? 0) + 1;
  return out;
}

function findingJson(f: VerifyFinding): Record<string, unknown> {
  return {
    partition: f.partition,
    segment: f.segment?.toString() ?? null,
    end: f.end?.toString() ?? null,
    status: f.status,
    location: f.location,
    key: f.key ?? null,
    method: f.method ?? null,
    detail: f.detail,
  };
}

function sum<T>(items: readonly T[], of: (item: T) => number): number {
  return items.reduce((n, item) => n + of(item), 0);
}
