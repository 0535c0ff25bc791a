// Binding a listener: on first start, and again on the same port when a listener is replaced to
// serve a renewed TLS certificate (the port the replaced one let go may take a moment to be free).
import type { EventEmitter } from "node:events";
import type { Server } from "node:net";
import { type Clock, sleep, systemClock } from "../base/clock.ts";

/**
 * Listens on `hostname:port`, trying `attempts` times 20 ms apart while the port is in use.
 * @throws the bind's error (`EADDRINUSE` once the attempts are spent)
 */
export async function listenOn(
  server: Server,
  hostname: string,
  port: number,
  options: { attempts?: number; clock?: Clock } = {},
): Promise<void> {
  const attempts = options.attempts ?? 1;
  // Typed as an emitter: with npm packages' Node types in the same check, `net.Server` loses its
  // EventEmitter methods in Deno's type checker (the value has them in every runtime).
  const events = server as unknown as EventEmitter;
  for (let attempt = 1;; attempt++) {
    try {
      await new Promise<void>((resolve, reject) => {
        events.once("error", reject);
        server.listen(port, hostname, () => {
          events.off("error", reject);
          resolve();
        });
      });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EADDRINUSE" || attempt >= attempts) throw err;
      await sleep(20, undefined, options.clock ?? systemClock);
    }
  }
}
