// A server for request-line tests, run under Deno in-process or under Bun as a script
// (`bun test/http/_route_echo.ts` prints `port N` and serves until its stdin closes): tierd's
// `serve()` with a handler that answers the method and the path and query it was routed by.
import { readFile } from "node:fs/promises";
import process from "node:process";
import { serve } from "../../src/http/serve.ts";

/** Starts the echo server on a free loopback port (HTTPS with the PEM files `tls` names). */
export function startRouteEcho(tls?: { cert: string; key: string }) {
  return serve({
    fetch(req: Request) {
      const url = new URL(req.url);
      return Response.json({ method: req.method, route: url.pathname + url.search });
    },
  }, {
    hostname: "127.0.0.1",
    port: 0,
    tls: tls && (async () => ({
      cert: await readFile(tls.cert, "utf8"),
      key: await readFile(tls.key, "utf8"),
    })),
  });
}

/**
 * Runs this script under Bun (the single binary's runtime) from a Deno test, with `args`.
 * @returns its port once it listens, and how to stop it
 */
export async function spawnBunEcho(
  args: string[] = [],
): Promise<{ port: number; stop(): Promise<void> }> {
  const child = new Deno.Command("npx", {
    args: ["-y", "bun@1", new URL(import.meta.url).pathname, ...args],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const lines = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  const stop = async () => {
    await child.stdin.close().catch(() => {});
    const kill = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await child.status;
    clearTimeout(kill);
    await lines.cancel().catch(() => {});
  };
  let out = "";
  try {
    for (;;) {
      const { value, done } = await lines.read();
      if (done) throw new Error(`bun ended before listening: ${out}`);
      out += value;
      const m = /port (\d+)/.exec(out);
      if (m) return { port: Number(m[1]), stop };
    }
  } catch (err) {
    await stop();
    throw err;
  }
}

if (import.meta.main) {
  // `bun _route_echo.ts [cert.pem key.pem]`
  const [cert, key] = process.argv.slice(2);
  const server = await startRouteEcho(cert ? { cert, key } : undefined);
  console.log(`port ${server.port}`);
  process.stdin.resume();
  process.stdin.on("end", () => void server.close().then(() => process.exit(0)));
}
