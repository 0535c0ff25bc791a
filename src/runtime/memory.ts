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

let madeSinceCollection = 0;

/** Bytes of answers made between two collections asked for. */
const COLLECT_EVERY_BYTES = 64 * 1024 * 1024;

/**
 * Counts bytes of answer made for a client (a poll's JSON pieces): every 64 MiB of them, asks
 * Bun for a collection in the background. Those pieces, and the messages decoded for them, are
 * garbage once sent, and JavaScriptCore left to its own pace lets the garbage of concurrent large
 * answers pile up to several times the read memory budget. A no-op elsewhere (V8 keeps pace).
 */
export function answerBytesMade(bytes: number): void {
  madeSinceCollection += bytes;
  if (madeSinceCollection < COLLECT_EVERY_BYTES) return;
  madeSinceCollection = 0;
  const bun = (globalThis as { Bun?: BunRuntime }).Bun;
  bun?.gc(false);
}
