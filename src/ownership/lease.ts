// Holding a key space: claiming it at start (a conditional create of the owner record, or a
// takeover by a conditional replace), and proving it again before every write and delete: the
// record is read before each (reads asked for at once share one); the owner's writes are recorded
// in it (a conditional replace) at most once a minute. Once another agent owns the key space this one is
// fenced: every later write or delete is refused, and the listeners are told (the agent stops).
//
// Stores that ignore conditional requests cannot enforce the race between two writers; every
// write of the record is read back, so a lost race is noticed right after, and each delete is
// preceded by a fresh read.
import type { Clock } from "../base/clock.ts";
import type { RetryingStore } from "../../providers/retrying_store.ts";
import { type ObjectStore, StoreError } from "../../providers/types.ts";
import { type KeySpace, type KeySpaceOwner, keySpaceRoot } from "../layout/key_space.ts";
import { ownerKey } from "../layout/object_keys.ts";
import type { Logger } from "../log.ts";
import { VERSION } from "../version.ts";
import type { AgentIdentity } from "./identity.ts";
import {
  decodeOwnerRecord,
  describeOwner,
  encodeOwnerRecord,
  lineageOf,
  type OwnerRecord,
} from "./owner_record.ts";

/** How each call on the owner record may take, retries included. */
const CALL_DEADLINE_MS = 30_000;
/** Rounds of a claim that lost a race before it gives up. */
const CLAIM_ROUNDS = 5;

/** Another agent owns the key space: this one must not start writing there. */
export class KeySpaceOwned extends Error {
  override readonly name = "KeySpaceOwned";
  constructor(
    readonly keySpace: KeySpace,
    readonly owner: OwnerRecord,
    readonly me: AgentIdentity,
    where: string,
  ) {
    const sameHost = owner.host !== "" && owner.host === me.host;
    super(
      `key space ${keySpaceRoot(keySpace)} of ${where} belongs to another agent: ` +
        `${describeOwner(owner)}. This agent (${me.agentId} on host ${me.host}) copies, evicts, ` +
        "deletes and sweeps nothing there. " +
        (sameHost
          ? "That is this host's name: if this host's state dir was lost or replaced, take the " +
            "key space back with `tierd restore` or `tierd run --take-over`; "
          : `If this host replaces ${owner.host || "that host"}, take the key space over with ` +
            "`tierd restore` (or `tierd run --take-over`); ") +
        "otherwise give this broker a key space of its own (agent.cluster_id).",
    );
  }
}

/** The key space was taken over by another agent while this one held it. */
export class KeySpaceFenced extends Error {
  override readonly name = "KeySpaceFenced";
  constructor(readonly keySpace: KeySpace, readonly owner: OwnerRecord | undefined, me: string) {
    super(
      owner
        ? `key space ${keySpaceRoot(keySpace)} was taken over by ${describeOwner(owner)}; this ` +
          `agent (${me}) writes, evicts and deletes nothing there any more`
        : `the owner record of key space ${keySpaceRoot(keySpace)} is gone; this agent (${me}) ` +
          "writes nothing there until it is the owner again",
    );
  }
}

/** How a claim ended. */
export type ClaimOutcome =
  | { kind: "created"; record: OwnerRecord }
  | { kind: "ours"; record: OwnerRecord }
  | { kind: "taken-over"; record: OwnerRecord; from: OwnerRecord };

/** Options of {@linkcode KeySpaceLease}. */
export interface LeaseOptions {
  /** The store, with retries (never the fenced view). */
  store: RetryingStore;
  keySpace: KeySpace;
  identity: AgentIdentity;
  clock: Clock;
  logger: Logger;
  /** The store in words, for messages (`s3 http://… bucket 'b'`). */
  describe: string;
  /** The owner's last write is recorded in the record at most this often. @default 60000 */
  heartbeatMs?: number;
  /** A claim made on the first write (the one at start failed) may take the key space over. */
  takeOver?: boolean;
  /** Called once a claim succeeds (at start, or on the first write after a failed one). */
  onClaimed?: (outcome: ClaimOutcome) => Promise<void>;
}

interface Seen {
  record: OwnerRecord;
  version?: string;
}

/** This agent's hold on its key space. */
export class KeySpaceLease implements KeySpaceOwner {
  readonly #o: Required<LeaseOptions>;
  readonly #key: string;
  #seen?: Seen;
  /** monotonic ms of the last recorded write. */
  #recordedAt = -Infinity;
  #fenced?: KeySpaceFenced;
  #claimed = false;
  #pending?: Promise<void>;
  readonly #listeners: ((err: KeySpaceFenced) => void)[] = [];

  constructor(options: LeaseOptions) {
    this.#o = {
      heartbeatMs: 60_000,
      takeOver: false,
      onClaimed: () => Promise.resolve(),
      ...options,
    };
    this.#key = ownerKey(options.keySpace);
  }

  /** This agent's id. */
  get agentId(): string {
    return this.#o.identity.agentId;
  }

  /** Set once another agent took the key space over. */
  get fenced(): KeySpaceFenced | undefined {
    return this.#fenced;
  }

  /** Agents whose objects belong to this key space (earlier owners and this one). */
  lineage(): Set<string> {
    const s = this.#seen ? lineageOf(this.#seen.record) : new Set<string>();
    s.add(this.#o.identity.agentId);
    return s;
  }

  /** Calls `fn` once, when the lease is fenced. */
  onFenced(fn: (err: KeySpaceFenced) => void): void {
    this.#listeners.push(fn);
  }

  /**
   * Claims the key space: creates the owner record when there is none, keeps it when it names
   * this agent, and with `takeOver` replaces another agent's (fencing it).
   * @throws {KeySpaceOwned} when another agent owns it and `takeOver` is not set
   * @throws {OwnerRecordError} when the record cannot be read
   */
  async claim(options: { takeOver?: boolean } = {}): Promise<ClaimOutcome> {
    const outcome = await this.#claim(options.takeOver ?? this.#o.takeOver);
    this.#claimed = true;
    await this.#o.onClaimed(outcome);
    return outcome;
  }

  async #claim(takeOver: boolean): Promise<ClaimOutcome> {
    const me = this.#o.identity;
    for (let round = 0; round < CLAIM_ROUNDS; round++) {
      const found = await this.#read();
      const now = this.#o.clock.now();
      if (!found) {
        // None yet, or removed by hand: the lineage this agent knew is kept (the earlier
        // owners' manifests stay this key space's); whoever creates it first owns it.
        const record = this.#recordOf({
          since: this.#seen?.record.since ?? now,
          previous: this.#seen?.record.previous ?? [],
        });
        const put = await this.#write(record, { ifAbsent: true });
        if (!put) continue; // someone created it first: look at theirs
        if (!(await this.#confirm(record))) continue;
        return { kind: "created", record };
      }
      if (found.record.agentId === me.agentId) {
        this.#proved(found, false);
        return { kind: "ours", record: found.record };
      }
      if (!takeOver) {
        throw new KeySpaceOwned(this.#o.keySpace, found.record, me, this.#o.describe);
      }
      const record = this.#recordOf({
        since: now,
        previous: [
          ...found.record.previous,
          { agentId: found.record.agentId, host: found.record.host, until: now },
        ],
      });
      if (!(await this.#write(record, { ifMatch: found.version }))) continue;
      if (!(await this.#confirm(record))) continue;
      return { kind: "taken-over", record, from: found.record };
    }
    throw new StoreError(
      "PreconditionFailed",
      `${this.#o.describe}: the owner record ${this.#key} kept changing under ${CLAIM_ROUNDS} ` +
        "claims (another agent claiming it at the same time?)",
      { op: "put", key: this.#key },
    );
  }

  /**
   * Proves this agent still owns the key space before a store write (`write`: a read of the
   * record, shared with one already under way; the write recorded every `heartbeatMs`) or delete
   * (`delete`: a read that starts after any already under way).
   * @throws {KeySpaceFenced} once another agent owns it
   */
  assertOwner(kind: "write" | "delete"): Promise<void> {
    if (this.#fenced) return Promise.reject(this.#fenced);
    if (kind === "write") {
      const heartbeatDue = this.#o.clock.monotonic() - this.#recordedAt >= this.#o.heartbeatMs;
      return this.#shared(heartbeatDue);
    }
    // A check already under way may have read the record before a takeover this delete must
    // see: wait for it, then read again (checks asked for meanwhile share that read).
    const before = this.#pending ?? Promise.resolve();
    return before.catch(() => {}).then(() => this.#shared(false));
  }

  #shared(heartbeat: boolean): Promise<void> {
    this.#pending ??= this.#check(heartbeat).finally(() => {
      this.#pending = undefined;
    });
    return this.#pending;
  }

  async #check(heartbeat: boolean): Promise<void> {
    const found = this.#claimed ? await this.#read() : undefined;
    if (!found) {
      // Not claimed yet (the claim at start failed: the store refused or did not answer), or
      // the record was removed by hand: claimed now, before the write; another owner found now
      // fences this agent as a takeover would.
      try {
        await this.claim();
      } catch (err) {
        if (err instanceof KeySpaceOwned) this.#fence(err.owner);
        throw err;
      }
      return;
    }
    if (found.record.agentId !== this.#o.identity.agentId) this.#fence(found.record);
    if (!heartbeat) return this.#proved(found, false);
    const record = { ...found.record, lastWrite: this.#o.clock.now(), nonce: nonce() };
    if (await this.#write(record, { ifMatch: found.version }) && await this.#confirm(record)) {
      return;
    }
    // Replaced meanwhile: ours still (a retried write of ours landed), or fenced.
    const after = await this.#read();
    if (after?.record.agentId !== this.#o.identity.agentId) this.#fence(after?.record);
    this.#proved(after!, true);
  }

  #fence(owner: OwnerRecord | undefined): never {
    if (!this.#fenced) {
      this.#fenced = new KeySpaceFenced(this.#o.keySpace, owner, this.#o.identity.agentId);
      this.#o.logger.error("key space taken over by another agent: this agent stops writing", {
        key_space: keySpaceRoot(this.#o.keySpace),
        owner: owner?.agentId,
        owner_host: owner?.host,
        owner_since: owner && new Date(owner.since).toISOString(),
        me: this.#o.identity.agentId,
      });
      for (const fn of this.#listeners) fn(this.#fenced);
    }
    throw this.#fenced;
  }

  #proved(seen: Seen, recorded: boolean): void {
    this.#seen = seen;
    if (recorded) this.#recordedAt = this.#o.clock.monotonic();
  }

  #recordOf(o: Pick<OwnerRecord, "since" | "previous">): OwnerRecord {
    const me = this.#o.identity;
    return {
      agentId: me.agentId,
      host: me.host,
      clusterId: this.#o.keySpace.clusterId,
      since: o.since,
      lastWrite: this.#o.clock.now(),
      previous: o.previous,
      tierdVersion: VERSION,
      nonce: nonce(),
    };
  }

  #view(): { store: ObjectStore; dispose: () => void } {
    const deadline = this.#o.store.deadline(CALL_DEADLINE_MS);
    return {
      store: this.#o.store.within(deadline, "housekeeping"),
      dispose: () => deadline.dispose(),
    };
  }

  /** The record and its version, or undefined when there is none. */
  async #read(): Promise<Seen | undefined> {
    const { store, dispose } = this.#view();
    try {
      const got = await store.get(this.#key);
      const record = decodeOwnerRecord(this.#key, got.bytes);
      return { record, version: got.version ?? got.etag };
    } catch (err) {
      if (err instanceof StoreError && err.kind === "NotFound") return undefined;
      throw err;
    } finally {
      dispose();
    }
  }

  /** A conditional write of the record; false when its condition did not hold. */
  async #write(
    record: OwnerRecord,
    condition: { ifAbsent: true } | { ifMatch: string | undefined },
  ): Promise<boolean> {
    if ("ifMatch" in condition && condition.ifMatch === undefined) {
      throw new StoreError(
        "Unsupported",
        `${this.#o.describe}: the store gave no version of ${this.#key}, so it cannot be ` +
          "replaced conditionally",
        { op: "put", key: this.#key },
      );
    }
    const { store, dispose } = this.#view();
    try {
      const put = await store.put(this.#key, encodeOwnerRecord(record), {
        ...condition as { ifAbsent?: boolean; ifMatch?: string },
        contentType: "application/json",
      });
      return put.status === "Created";
    } catch (err) {
      if (err instanceof StoreError && err.kind === "PreconditionFailed") return false;
      throw err;
    } finally {
      dispose();
    }
  }

  /** Reads the record back: true when it is the one just written (a store may ignore conditions). */
  async #confirm(record: OwnerRecord): Promise<boolean> {
    const found = await this.#read();
    if (!found || found.record.agentId !== record.agentId || found.record.nonce !== record.nonce) {
      return false;
    }
    this.#proved(found, true);
    return true;
  }
}

function nonce(): string {
  return [...crypto.getRandomValues(new Uint8Array(8))]
    .map((b) => b.toString(16).padStart(2, "0"))
    .join("");
}
