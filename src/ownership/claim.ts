// What `tierd run` and `tierd restore` do before they write to the bucket: make sure this state
// dir has an identity, that it is the key space's identity (a config that now names another
// `cluster_id` or `prefix` would leave every evicted segment unreadable), and claim the key space
// — creating its owner record, finding it already ours, or (restore, `--take-over`) taking it
// over from another agent, which fences it.
import type { Clock } from "../base/clock.ts";
import type { RetryingStore } from "../../providers/retrying_store.ts";
import { type KeySpace, keySpaceRoot, sameKeySpace } from "../layout/key_space.ts";
import type { Logger } from "../log.ts";
import { type AgentIdentity, ensureIdentity, IDENTITY_FILE, saveIdentity } from "./identity.ts";
import { type ClaimOutcome, KeySpaceLease } from "./lease.ts";
import { describeOwner } from "./owner_record.ts";

/** The state dir belongs to another key space than the config names. */
export class KeySpaceMismatch extends Error {
  override readonly name = "KeySpaceMismatch";
  constructor(stateDir: string, recorded: KeySpace, configured: KeySpace) {
    super(
      `state dir ${stateDir} belongs to key space ${keySpaceRoot(recorded)} (its ` +
        `${IDENTITY_FILE}), but the config names ${keySpaceRoot(configured)}: the segments this ` +
        "agent evicted live under the first. Set agent.cluster_id (and the store's prefix) back, " +
        "or point state_dir at a new directory and restore it (tierd restore)",
    );
  }
}

/** A key space this agent holds. */
export interface HeldKeySpace {
  identity: AgentIdentity;
  lease: KeySpaceLease;
  outcome: ClaimOutcome;
}

/** Options of {@linkcode claimKeySpace}. */
export interface ClaimOptions {
  stateDir: string;
  keySpace: KeySpace;
  /** The store with retries (the lease reads and writes the owner record through it). */
  store: RetryingStore;
  /** The store in words, for messages. */
  describe: string;
  clock: Clock;
  logger: Logger;
  /** Replace another agent's ownership (restore on a replacement host, `--take-over`). */
  takeOver: boolean;
}

/**
 * The lease of this state dir's agent on the key space, not claimed yet: the identity is made
 * if there is none, and checked against the key space.
 * @throws {KeySpaceMismatch} when the state dir was made for another key space
 * @throws {IdentityError} when the identity file cannot be read
 */
export async function openLease(
  o: ClaimOptions,
): Promise<{ identity: AgentIdentity; lease: KeySpaceLease }> {
  const { identity, created } = await ensureIdentity(o.stateDir, o.clock);
  if (identity.keySpace && !sameKeySpace(identity.keySpace, o.keySpace)) {
    throw new KeySpaceMismatch(o.stateDir, identity.keySpace, o.keySpace);
  }
  if (created) {
    o.logger.info("agent identity made for this state dir", {
      agent: identity.agentId,
      path: `${o.stateDir}/${IDENTITY_FILE}`,
    });
  }
  const lease = new KeySpaceLease({
    store: o.store,
    keySpace: o.keySpace,
    identity,
    clock: o.clock,
    logger: o.logger,
    describe: o.describe,
    takeOver: o.takeOver,
    onClaimed: async (outcome) => {
      if (!identity.keySpace) {
        identity.keySpace = { prefix: o.keySpace.prefix, clusterId: o.keySpace.clusterId };
        await saveIdentity(o.stateDir, identity);
      }
      const fields = { key_space: keySpaceRoot(o.keySpace), agent: identity.agentId };
      switch (outcome.kind) {
        case "created":
          o.logger.info("key space claimed: this agent is its owner", fields);
          break;
        case "ours":
          o.logger.info("key space owned by this agent", fields);
          break;
        case "taken-over":
          o.logger.warn("key space taken over: the previous owner is fenced and stops writing", {
            ...fields,
            previous_owner: describeOwner(outcome.from),
          });
          break;
      }
    },
  });
  return { identity, lease };
}

/**
 * Claims the key space for this state dir's agent.
 * @throws {KeySpaceMismatch} when the state dir was made for another key space
 * @throws {KeySpaceOwned} when another agent owns it and `takeOver` is not set
 * @throws {IdentityError} / {OwnerRecordError} when the identity or the record cannot be read
 */
export async function claimKeySpace(o: ClaimOptions): Promise<HeldKeySpace> {
  const { identity, lease } = await openLease(o);
  const outcome = await lease.claim();
  return { identity, lease, outcome };
}
