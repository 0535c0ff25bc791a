// This agent's durable identity: a random id made the first time an agent runs on a state dir,
// kept in `{state_dir}/agent.json` (written durably), with the key space it claimed. The owner
// record in the bucket names this id; a state dir that is wiped loses it, and `tierd restore`
// (or `tierd run --take-over`) makes the new one the owner again.
import { readFile } from "node:fs/promises";
import { mkdir } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import type { Clock } from "../base/clock.ts";
import type { KeySpace } from "../layout/key_space.ts";
import { writeFileDurable } from "../base/durable.ts";

/** The identity file inside `state_dir`. */
export const IDENTITY_FILE = "agent.json";

/** This agent as it knows itself. */
export interface AgentIdentity {
  /** Random, 32 lowercase hex digits. */
  agentId: string;
  /** ms since the epoch when the identity was made. */
  createdAt: number;
  /** The host it was made on. */
  host: string;
  /** The key space this agent owns (set when it first claims one). */
  keySpace?: KeySpace;
}

/** The identity file exists but cannot be used. */
export class IdentityError extends Error {
  override readonly name = "IdentityError";
  constructor(readonly path: string, detail: string) {
    super(
      `${path}: ${detail}; it names this agent as the owner of its key space — restore it from ` +
        "a backup, or move it aside and take the key space over (tierd run --take-over)",
    );
  }
}

/** The host name this process runs on, as the owner record names it. */
export function thisHost(): string {
  return hostname();
}

/**
 * Reads the identity of the agent of `stateDir`; undefined when there is none yet.
 * @throws {IdentityError} when the file is not a valid identity
 */
export async function loadIdentity(stateDir: string): Promise<AgentIdentity | undefined> {
  const path = join(stateDir, IDENTITY_FILE);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  let j: Record<string, unknown>;
  try {
    j = JSON.parse(text);
  } catch (err) {
    throw new IdentityError(path, `not JSON (${(err as Error).message})`);
  }
  if (j?.kind !== "tierd-agent" || j.version !== 1) {
    throw new IdentityError(path, "not a tierd agent identity of version 1");
  }
  if (typeof j.agent_id !== "string" || !/^[0-9a-f]{32}$/.test(j.agent_id)) {
    throw new IdentityError(path, "agent_id is not 32 hex digits");
  }
  const created = Date.parse(String(j.created_at));
  const ks = j.key_space as Record<string, unknown> | undefined | null;
  if (ks !== undefined && ks !== null) {
    if (typeof ks.prefix !== "string" || typeof ks.cluster_id !== "string") {
      throw new IdentityError(path, "key_space needs a prefix and a cluster_id");
    }
  }
  return {
    agentId: j.agent_id,
    createdAt: Number.isFinite(created) ? created : 0,
    host: typeof j.host === "string" ? j.host : "",
    ...(ks
      ? { keySpace: { prefix: ks.prefix as string, clusterId: ks.cluster_id as string } }
      : {}),
  };
}

/** Writes the identity durably. */
export async function saveIdentity(stateDir: string, id: AgentIdentity): Promise<void> {
  await mkdir(stateDir, { recursive: true });
  const json = {
    kind: "tierd-agent",
    version: 1,
    agent_id: id.agentId,
    created_at: new Date(id.createdAt).toISOString(),
    host: id.host,
    key_space: id.keySpace
      ? { prefix: id.keySpace.prefix, cluster_id: id.keySpace.clusterId }
      : null,
  };
  await writeFileDurable(
    join(stateDir, IDENTITY_FILE),
    new TextEncoder().encode(JSON.stringify(json, null, 1) + "\n"),
  );
}

/**
 * The identity of `stateDir`, made (and written) now when there is none.
 * @returns it, and whether it was made now
 */
export async function ensureIdentity(
  stateDir: string,
  clock: Clock,
): Promise<{ identity: AgentIdentity; created: boolean }> {
  const found = await loadIdentity(stateDir);
  if (found) return { identity: found, created: false };
  const identity: AgentIdentity = {
    agentId: newAgentId(),
    createdAt: clock.now(),
    host: thisHost(),
  };
  await saveIdentity(stateDir, identity);
  return { identity, created: true };
}

/** A fresh random agent id. */
export function newAgentId(): string {
  return [...crypto.getRandomValues(new Uint8Array(16))]
    .map((b) => b.toString(16).padStart(2, "0"))
    .join("");
}
