// A key space: the part of the bucket one agent owns, `{prefix}/{cluster_id}/`. Every object key
// tierd writes lies under it (object_keys.ts); its owner record names the one agent that may
// write, evict, delete and sweep there (src/ownership/).

/** Where a cluster's objects live: the parts of a key that are not a partition's own. */
export interface KeySpace {
  /** Key prefix of the configured backend. */
  prefix: string;
  clusterId: string;
}

/** `{prefix}/{cluster}/` as it appears in keys (no leading slash; one trailing slash). */
export function keySpaceRoot(ks: KeySpace): string {
  return [ks.prefix.replace(/\/+$/, ""), ks.clusterId].filter((p) => p !== "").join("/") + "/";
}

/** True when both name the same key space. */
export function sameKeySpace(a: KeySpace, b: KeySpace): boolean {
  return keySpaceRoot(a) === keySpaceRoot(b);
}

/** The agent that owns the key space, as the worker sees it (src/ownership/lease.ts). */
export interface KeySpaceOwner {
  /** This agent's id: what it writes into manifests and tombstones. */
  readonly agentId: string;
  /** Agents whose manifests are this key space's: earlier owners and this one. */
  lineage(): ReadonlySet<string>;
}
