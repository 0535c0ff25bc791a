// What the housekeeping job tests share: a phase rig (one partition of real segments, a sim
// store under the retries, a fake clock) whose store can be scripted — a call failed, a listing
// that lies — the job's environment as the housekeeper builds it (optionally within a request
// quota), and the steps that put retired generations in the journal as the worker does (a purge,
// a recreated topic).
import assert from "node:assert/strict";
import { decorateStore, type StoreCall } from "../../../providers/decorate.ts";
import type {
  ListOptions,
  ListPage,
  MultipartUpload,
  ObjectStore,
} from "../../../providers/types.ts";
import { newIncarnation } from "../../../src/partition/incarnation.ts";
import { type RetiredGeneration, retiredOf } from "../../../src/state/segment_state.ts";
import type { JobEnv, Tended } from "../../../src/tier/housekeeping/job.ts";
import { RequestQuota } from "../../../src/tier/housekeeping/quota.ts";
import {
  emptyHousekeepingState,
  type HousekeepingState,
} from "../../../src/tier/housekeeping/state.ts";
import { copyPhase } from "../../../src/tier/phases/copy.ts";
import { advanceFloor } from "../../../src/tier/phases/floor.ts";
import { retiredEvents } from "../../../src/tier/retirement.ts";
import { type PhaseRig, phaseRig, type RigOptions } from "../_phase_rig.ts";

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;

/** How the store answers while a test scripts it; anything left undefined runs on the sim. */
export interface StoreScript {
  /** Answers a call instead of the store (a fault), or returns undefined to let it run. */
  around?: (call: StoreCall<unknown>) => Promise<unknown> | undefined;
  /** Answers listings instead of the store; `store` is the honest one underneath. */
  list?: (
    prefix: string,
    options: ListOptions | undefined,
    store: ObjectStore,
  ) => Promise<ListPage>;
  /** Answers multipart listings instead of the store. */
  listMultipartUploads?: (prefix: string, store: ObjectStore) => Promise<MultipartUpload[]>;
}

/** A phase rig whose store a test can script, and the job environment over it. */
export interface HousekeepingRig extends PhaseRig {
  /** Cleared with `honest()`. */
  script: StoreScript;
  /** Stops every scripted answer. */
  honest(): void;
  /** The partition as housekeeping tends it. */
  tended(): Tended;
  /**
   * The environment a job runs in, as the housekeeper builds it: the retrying store within a
   * deadline, counted against `quota` when given.
   */
  env(o?: { state?: HousekeepingState; quota?: number; targets?: Tended[] }): JobEnv & {
    dispose(): void;
  };
}

/** A rig for housekeeping jobs (see {@link HousekeepingRig}). */
export async function housekeepingRig(o: RigOptions = {}): Promise<HousekeepingRig> {
  const script: StoreScript = {};
  const r = await phaseRig({
    ...o,
    wrap: (sim) => {
      const inner = o.wrap ? o.wrap(sim) : sim;
      const base = decorateStore(inner, <T>(call: StoreCall<T>): Promise<T> => {
        const answer = script.around?.(call as StoreCall<unknown>);
        return (answer as Promise<T> | undefined) ?? call.run(call.signal);
      });
      return {
        ...base,
        list: (prefix, options) =>
          script.list ? script.list(prefix, options, base) : base.list(prefix, options),
        listMultipartUploads: (prefix, options) =>
          script.listMultipartUploads
            ? script.listMultipartUploads(prefix, base)
            : base.listMultipartUploads(prefix, options),
      };
    },
  });
  const rig = r as HousekeepingRig;
  rig.script = script;
  rig.honest = () => {
    delete script.around;
    delete script.list;
    delete script.listMultipartUploads;
  };
  rig.tended = () => ({ ledger: rig.ledger, format: rig.format, dir: rig.dir });
  rig.env = (e = {}) => {
    const deadline = rig.store.deadline(10 * MINUTE);
    const within = rig.store.within(deadline, "housekeeping");
    return {
      config: rig.config,
      store: e.quota === undefined ? within : new RequestQuota(e.quota).wrap(within),
      clock: rig.clock,
      log: rig.ctx.log,
      observer: rig.observer,
      keySpace: rig.keySpace,
      targets: e.targets ?? [rig.tended()],
      state: e.state ?? emptyHousekeepingState(),
      dispose: () => deadline.dispose(),
    };
  };
  return rig;
}

/** Copies every sealed segment into the current generation and advances the floor. */
export async function copyAll(r: PhaseRig): Promise<void> {
  const out = await copyPhase(r.ctx, r.ledger, {
    segments: await r.local(),
    format: r.format,
    reportedGaps: new Set(),
  });
  assert.deepEqual(out.problems, []);
  assert.ok(out.copied > 0, "something copied");
  await advanceFloor(r.ctx, r.ledger);
}

/** A purge, as the floor phase journals it: a new generation, the old one retired. */
export async function purge(r: PhaseRig): Promise<RetiredGeneration> {
  const old = r.ledger.state.generation;
  const incarnation = r.ledger.state.incarnation!;
  const at = r.clock.now();
  await r.ledger.record(
    { type: "generation", generation: old + 1n, at },
    ...retiredEvents(incarnation, [old], "purged: test", at),
  );
  return retiredOf(r.ledger.state).find((x) =>
    x.incarnation === incarnation && x.generation === old
  )!;
}

/**
 * A recreated topic, as boot journals it: a new incarnation, every generation of the old one
 * retired.
 * @returns the old incarnation
 */
export async function recreate(r: PhaseRig): Promise<bigint> {
  const old = r.ledger.state.incarnation!;
  const generations = [...r.ledger.state.segments.keys(), r.ledger.state.generation];
  const at = r.clock.now();
  await r.ledger.record(
    {
      type: "incarnation",
      incarnation: newIncarnation(),
      device: r.part.device,
      inode: r.part.inode,
      at,
    },
    ...retiredEvents(old, generations, "recreated: test", at),
  );
  return old;
}

/** Every object in the sim, by key, with its version (a rewrite shows as a new version). */
export function snapshot(r: PhaseRig): Map<string, string> {
  return new Map([...r.sim.objects].map(([key, o]) => [key, o.version]));
}

/** Puts `key` straight into the sim (the test's own hands, not the agent's). */
export async function plant(r: PhaseRig, key: string, text = "not tierd's"): Promise<void> {
  await r.sim.put(key, new TextEncoder().encode(text));
}
