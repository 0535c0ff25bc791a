// The owner record of a key space: `{prefix}/{cluster_id}/owner.json`, naming the one agent that
// may write, evict, delete and sweep there, the host it runs on, when it became the owner and
// when it last wrote, and the agents that owned the key space before it (whose objects are still
// this key space's). Created with a conditional create, replaced only with a conditional replace
// (the writer's heartbeat, or a takeover that fences the old owner). Versioned JSON.

/** The record format this build writes and reads. */
export const OWNER_RECORD_VERSION = 1;

/** An earlier owner, as a takeover recorded it. */
export interface PreviousOwner {
  agentId: string;
  host: string;
  /** ms since the epoch when it stopped being the owner. */
  until: number;
}

/** Who owns a key space. */
export interface OwnerRecord {
  agentId: string;
  host: string;
  clusterId: string;
  /** ms since the epoch when this agent became the owner. */
  since: number;
  /** ms since the epoch of the owner's last recorded write (updated at most every minute). */
  lastWrite: number;
  /** Owners before this one, oldest first. */
  previous: PreviousOwner[];
  tierdVersion: string;
  /** Random, so every replacement's bytes differ (an S3 version is the MD5 of the bytes). */
  nonce: string;
}

/** An owner record that cannot be read: never overwritten, never guessed at. */
export class OwnerRecordError extends Error {
  override readonly name = "OwnerRecordError";
  constructor(readonly key: string, detail: string) {
    super(
      `owner record ${key}: ${detail}; tierd writes nothing to this key space until the record ` +
        "is repaired or removed by hand",
    );
  }
}

/** Encodes a record as UTF-8 JSON. */
export function encodeOwnerRecord(r: OwnerRecord): Uint8Array {
  const json = {
    kind: "tierd-key-space-owner",
    version: OWNER_RECORD_VERSION,
    agent_id: r.agentId,
    host: r.host,
    cluster_id: r.clusterId,
    since: new Date(r.since).toISOString(),
    last_write: new Date(r.lastWrite).toISOString(),
    previous: r.previous.map((p) => ({
      agent_id: p.agentId,
      host: p.host,
      until: new Date(p.until).toISOString(),
    })),
    tierd_version: r.tierdVersion,
    nonce: r.nonce,
  };
  return new TextEncoder().encode(JSON.stringify(json, null, 1) + "\n");
}

/**
 * Decodes and checks a record.
 * @throws {OwnerRecordError} naming the key and what is wrong
 */
export function decodeOwnerRecord(key: string, bytes: Uint8Array): OwnerRecord {
  const bad = (detail: string): never => {
    throw new OwnerRecordError(key, detail);
  };
  if (bytes.length > 1 << 20) bad(`${bytes.length} bytes, far more than a record holds`);
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (err) {
    return bad(`not UTF-8 JSON (${(err as Error).message})`);
  }
  if (typeof j !== "object" || j === null || Array.isArray(j)) return bad("not a JSON object");
  if (j.kind !== "tierd-key-space-owner") return bad(`kind ${JSON.stringify(j.kind)}`);
  if (j.version !== OWNER_RECORD_VERSION) {
    return bad(`version ${JSON.stringify(j.version)}, this tierd reads ${OWNER_RECORD_VERSION}`);
  }
  const id = (v: unknown, name: string): string =>
    typeof v === "string" && /^[0-9a-f]{32}$/.test(v) ? v : bad(`${name} is not 32 hex digits`);
  const text = (v: unknown, name: string): string =>
    typeof v === "string" && v.length <= 1024 ? v : bad(`${name} is not a string`);
  const time = (v: unknown, name: string): number => {
    const t = typeof v === "string" ? Date.parse(v) : NaN;
    return Number.isFinite(t) ? t : bad(`${name} is not a time`);
  };
  if (!Array.isArray(j.previous) || j.previous.length > 10_000) {
    return bad("previous is not a list");
  }
  return {
    agentId: id(j.agent_id, "agent_id"),
    host: text(j.host, "host"),
    clusterId: text(j.cluster_id, "cluster_id"),
    since: time(j.since, "since"),
    lastWrite: time(j.last_write, "last_write"),
    previous: j.previous.map((raw: unknown, i: number) => {
      const p = (raw ?? {}) as Record<string, unknown>;
      return {
        agentId: id(p.agent_id, `previous[${i}].agent_id`),
        host: text(p.host, `previous[${i}].host`),
        until: time(p.until, `previous[${i}].until`),
      };
    }),
    tierdVersion: typeof j.tierd_version === "string" ? j.tierd_version : "",
    nonce: typeof j.nonce === "string" ? j.nonce : "",
  };
}

/** Every agent whose objects belong to the key space: earlier owners and the current one. */
export function lineageOf(r: OwnerRecord): Set<string> {
  return new Set([...r.previous.map((p) => p.agentId), r.agentId]);
}

/** The owner in words, for the line that refuses a start: id, host, since, last write. */
export function describeOwner(r: OwnerRecord): string {
  return `agent ${r.agentId} on host ${r.host || "(unknown)"}, owner since ` +
    `${new Date(r.since).toISOString()}, last wrote ${new Date(r.lastWrite).toISOString()}`;
}
