// A plain HTTP proxy between the agent and MinIO that holds each request for a settable delay
// before forwarding it, so a backlog drains slowly enough to be seen mid-copy. When MinIO is
// gone, the client's connection is reset (a network failure, as the agent would meet it).
// Headers pass unchanged, so SigV4 signatures still verify.
import http from "node:http";
import type { AddressInfo } from "node:net";

/** A running slow proxy. */
export interface SlowProxy {
  /** `http://127.0.0.1:PORT`, the agent's endpoint. */
  endpoint: string;
  /** Milliseconds each request waits before it is forwarded. */
  setDelay(ms: number): void;
  close(): Promise<void>;
}

/** Starts a proxy to `target` (`http://127.0.0.1:PORT`). */
export async function startSlowProxy(target: string, delayMs = 0): Promise<SlowProxy> {
  const t = new URL(target);
  let delay = delayMs;
  const server = http.createServer((req, res) => {
    const forward = () => {
      const up = http.request({
        host: t.hostname,
        port: t.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      up.on("error", () => req.socket.destroy());
      req.pipe(up);
    };
    if (delay > 0) setTimeout(forward, delay);
    else forward();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    setDelay: (ms) => void (delay = ms),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
