// A server for request-line tests, run under Deno in-process or under Bun as a script
// (`bun test/http/_route_echo.ts` prints `port N` and serves until its stdin closes): tierd's
// `serve()` with a handler that answers the method and the path and query it was routed by.
import process from "node:process";
import { serve } from "../../src/http/serve.ts";

/** Starts the echo server on a free loopback port. */
export function startRouteEcho() {
  return serve({
    fetch(req: Request) {
      const url = new URL(req.url);
      return Response.json({ method: req.method, route: url.pathname + url.search });
    },
  }, { hostname: "127.0.0.1", port: 0 });
}

if (import.meta.main) {
  const server = await startRouteEcho();
  console.log(`port ${server.port}`);
  process.stdin.resume();
  process.stdin.on("end", () => void server.close().then(() => process.exit(0)));
}
