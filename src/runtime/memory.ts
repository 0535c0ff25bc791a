// Gives the memory of boot's garbage back: replaying many thousand journal records and reading
// as many markers leaves a heap several times the size of what stays. Under Bun (the shipped
// binary) a full collection is asked for once boot is done, so the agent's resident memory is
// what it holds, not what boot touched; Deno's V8 shrinks its heap by itself.

interface BunRuntime {
  gc(force: boolean): void;
}

/** Collects boot's garbage now where the runtime allows it (Bun); a no-op elsewhere. */
export function collectBootGarbage(): void {
  const bun = (globalThis as { Bun?: BunRuntime }).Bun;
  bun?.gc(true);
}
