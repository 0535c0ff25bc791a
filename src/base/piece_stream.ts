// A response body made a piece at a time as the client takes it, that gives back what the answer
// holds exactly once — when the last piece is taken, when making a piece fails, or when the
// client goes away. Every streamed answer of tierd's listeners is one of these.

/** What {@linkcode pieceStream} calls besides the pieces. */
export interface PieceStreamHooks {
  /** Gives back what the answer holds (read memory, the answer's files); called exactly once. */
  release(): void | Promise<void>;
  /**
   * Told of a piece that could not be made; the stream then errors, so the server cuts the
   * connection and a client never takes a short body for a whole one.
   */
  failed?(err: unknown): void;
}

/**
 * A byte stream over `pieces`, pulled one piece per read (no piece is made before the client
 * asks for it).
 *
 * @param pieces the body's pieces, in order (sync or async)
 * @param hooks the release and the failure report
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * let released = 0;
 * const body = pieceStream(["he", "llo"].map((s) => new TextEncoder().encode(s)).values(), {
 *   release: () => void released++,
 * });
 * assert.equal(await new Response(body).text(), "hello");
 * assert.equal(released, 1);
 * ```
 */
export function pieceStream(
  pieces: Iterator<Uint8Array> | AsyncIterator<Uint8Array>,
  hooks: PieceStreamHooks,
): ReadableStream<Uint8Array> {
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await hooks.release();
  };
  /** The client went away: nothing more is sent, and nothing that follows is an error. */
  let cancelled = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await pieces.next();
        if (cancelled) return;
        if (done) {
          controller.close();
          await release();
          return;
        }
        controller.enqueue(value);
      } catch (err) {
        if (cancelled) return;
        hooks.failed?.(err);
        controller.error(err);
        await release();
      }
    },
    async cancel() {
      cancelled = true;
      await Promise.resolve(pieces.return?.(undefined)).catch(() => {});
      await release();
    },
  }, { highWaterMark: 0 });
}

/**
 * `bytes` as pieces of at most `size` bytes (views, not copies).
 *
 * @param bytes the whole body
 * @param size the largest piece
 */
export function* piecesOf(bytes: Uint8Array, size: number): Generator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) {
    yield bytes.subarray(at, Math.min(bytes.length, at + size));
  }
}
