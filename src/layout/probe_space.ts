// Where one agent's probe objects live: `{prefix}/.tierd-probe/{space}/`, `space` a digest of the
// host and the state dir, so that the agent's next probe finds (and removes) what a probe cut off
// by a crash left, and never touches another agent's. `tierd probe` from the command line has a
// space of its own beside the running agent's.
import { createHash } from "node:crypto";
import { hostname } from "node:os";
import { resolve } from "node:path";

/** The probe space of the agent whose state dir is `stateDir` on this host. */
export function probeSpace(stateDir: string, role: "agent" | "cli" = "agent"): string {
  const digest = createHash("sha256").update(`${hostname()}\0${resolve(stateDir)}`).digest("hex");
  return role === "cli" ? `${digest.slice(0, 16)}-cli` : digest.slice(0, 16);
}
