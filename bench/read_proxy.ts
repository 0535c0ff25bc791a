// A TCP proxy that adds a fixed delay to every request on its way to the object store, the way a
// real store's first-byte latency adds to every GET (loopback MinIO has almost none). Bytes from
// the client are held `delay` ms before they are forwarded (order kept per connection); answers
// stream back undelayed, so bandwidth is untouched and each request costs `delay` ms more.
// Run as its own process, so its copying does not share the measuring process's event loop:
//   deno run -A bench/read_proxy.ts --target 127.0.0.1:9000 --delay-ms 10
// It prints its port on the first line of stdout.
import { progress } from "./_stats.ts";

/** A running proxy child process. */
export interface DelayProxy {
  /** `http://127.0.0.1:PORT` */
  endpoint: string;
  delayMs: number;
  stop(): Promise<void>;
}

/**
 * Starts the proxy in a child process in front of `endpoint` (an `http://host:port` URL).
 * @throws {Error} when the child does not report its port
 */
export async function startDelayProxy(endpoint: string, delayMs: number): Promise<DelayProxy> {
  const target = new URL(endpoint);
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL(import.meta.url).pathname,
      "--target",
      `${target.hostname}:${target.port}`,
      "--delay-ms",
      String(delayMs),
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("delay proxy exited before reporting its port");
    text += value;
  }
  const port = Number(text.split("\n")[0].trim());
  // Keep draining stdout so the child never blocks on it.
  (async () => {
    try {
      while (!(await reader.read()).done) { /* drain */ }
    } catch { /* closed */ }
  })();
  progress("proxy", `delay proxy :${port} → ${target.host}, +${delayMs} ms per request`);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    delayMs,
    stop: async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* gone */ }
      await child.status;
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function handle(client: Deno.TcpConn, target: Deno.ConnectOptions, delayMs: number) {
  let upstream: Deno.TcpConn;
  try {
    upstream = await Deno.connect(target);
  } catch {
    client.close();
    return;
  }
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  const closeBoth = () => {
    try {
      client.close();
    } catch { /* closed */ }
    try {
      upstream.close();
    } catch { /* closed */ }
  };
  // Store → client, undelayed.
  const back = (async () => {
    const buf = new Uint8Array(256 * 1024);
    try {
      for (;;) {
        const n = await upstream.read(buf);
        if (n === null) break;
        let at = 0;
        while (at < n) at += await client.write(buf.subarray(at, n));
      }
    } catch { /* reset */ }
  })();
  // Client → store, each read held until `delayMs` after it arrived, in order.
  const forth = (async () => {
    let chain = Promise.resolve();
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await client.read(buf);
        if (n === null) break;
        const bytes = buf.slice(0, n);
        const due = performance.now() + delayMs;
        chain = chain.then(async () => {
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
          let at = 0;
          while (at < bytes.length) at += await upstream.write(bytes.subarray(at));
        });
      }
      await chain;
    } catch { /* reset */ }
  })();
  await Promise.race([back, forth]);
  closeBoth();
  await Promise.allSettled([back, forth]);
}

async function main(args: string[]): Promise<void> {
  const arg = (name: string) => {
    const i = args.indexOf(name);
    if (i < 0 || i + 1 >= args.length) throw new Error(`read_proxy: missing ${name}`);
    return args[i + 1];
  };
  const [hostname, port] = arg("--target").split(":");
  const delayMs = Number(arg("--delay-ms"));
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  console.log(String((listener.addr as Deno.NetAddr).port));
  Deno.addSignalListener("SIGTERM", () => Deno.exit(0));
  for await (const conn of listener) {
    handle(conn, { hostname, port: Number(port) }, delayMs).catch(() => {});
  }
}

if (import.meta.main) await main(Deno.args);
