// Sequencing for the Iggy e2e scenarios: steps that build on each other (after a failure the
// rest are reported as ignored rather than failing on a broken premise), and polling for a state.

/** Runs test steps in order; once one fails, the rest are registered as ignored. */
export class StepRunner {
  #failed = false;

  constructor(readonly t: Deno.TestContext) {}

  /** True once a step failed. */
  get failed(): boolean {
    return this.#failed;
  }

  /** Runs `fn` as a step (or registers it ignored, after a failure or when `ignore` is set). */
  async run(
    name: string,
    fn: () => void | Promise<void>,
    o: { ignore?: boolean } = {},
  ): Promise<void> {
    const ok = await this.t.step({ name, ignore: o.ignore || this.#failed, fn });
    if (!ok && !o.ignore) this.#failed = true;
  }
}

/**
 * Calls `probe` every 200 ms until it returns a value.
 * @throws {Error} naming `what` after `timeoutMs`
 */
export async function waitUntil<T>(
  what: string,
  timeoutMs: number,
  probe: () => Promise<T | undefined>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
