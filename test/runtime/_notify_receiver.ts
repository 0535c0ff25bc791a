// A fake systemd for sd_notify tests: a unix datagram socket that prints every message it
// receives as one JSON line. Run as a child (`deno run --unstable-net` — Deno's datagram API
// is unstable, and only this helper needs it); `startNotifyReceiver` does that and collects
// the messages for the test.
import { join } from "node:path";
import { tempDir } from "../_util.ts";

/** A running fake `NOTIFY_SOCKET` receiver. */
export interface NotifyReceiver {
  /** The socket path to pass as `NOTIFY_SOCKET`. */
  socket: string;
  /** Every message so far, in order (`"READY=1\nSTATUS=…\n"`). */
  messages: string[];
  /** Resolves with the first message (from index `from`) `match` accepts, or rejects. */
  waitFor(match: (m: string) => boolean, timeoutMs: number, from?: number): Promise<string>;
  stop(): Promise<void>;
}

/** Starts a receiver on a fresh socket path. */
export async function startNotifyReceiver(): Promise<NotifyReceiver> {
  const dir = await tempDir("tierd-notify");
  const socket = join(dir.path, "notify.sock");
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--unstable-net",
      "--allow-read",
      "--allow-write",
      "--allow-net",
      import.meta.filename!,
      socket,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const messages: string[] = [];
  let listening!: () => void;
  const up = new Promise<void>((resolve) => (listening = resolve));
  const reading = (async () => {
    let pending = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      pending += chunk;
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        if (line === "listening") listening();
        else if (line !== "") messages.push(JSON.parse(line));
      }
    }
  })();
  await Promise.race([
    up,
    child.status.then((s) => {
      throw new Error(`notify receiver exited (${s.code}) before listening`);
    }),
  ]);
  return {
    socket,
    messages,
    async waitFor(match, timeoutMs, from = 0) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = messages.slice(from).find(match);
        if (found !== undefined) return found;
        if (Date.now() > until) {
          throw new Error(
            `no matching sd_notify message in ${timeoutMs} ms; got ${JSON.stringify(messages)}`,
          );
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      try {
        child.kill("SIGTERM");
      } catch {
        // gone already
      }
      await child.status;
      await reading;
      await dir.cleanup();
    },
  };
}

if (import.meta.main) {
  const path = Deno.args[0];
  // deno-lint-ignore no-explicit-any
  const listen = (Deno as any).listenDatagram as (o: object) => {
    receive(): Promise<[Uint8Array, unknown]>;
  };
  const conn = listen({ transport: "unixpacket", path });
  console.log("listening");
  for (;;) {
    const [data] = await conn.receive();
    console.log(JSON.stringify(new TextDecoder().decode(data)));
  }
}
