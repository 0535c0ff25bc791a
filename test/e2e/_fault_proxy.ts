// A fault proxy between tierd and MinIO: it forwards every request unchanged (method, path,
// query, headers — the Host header included, so SigV4 signatures made for the proxy's address
// still verify at a MinIO started without MINIO_DOMAIN — and body), and for GETs of `.log`
// objects it can break the answer the way a network does: flip one byte of the body (a bad NIC,
// proxy or memory), say nothing at all, or send the headers and half the body and then stall.
// MinIO's objects stay good throughout; only what the client is handed changes.
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { concatBytes } from "../../src/base/bytes.ts";

/** What the proxy does with a GET of a `.log` object. */
export type LogGetMode =
  | "forward"
  /** Accepted and read, never answered. */
  | "silent"
  /** MinIO's status and headers (the full content-length), half the body, then nothing. */
  | "half a body";

/** An answer the proxy corrupted: which object, the range asked for, the bytes it sent. */
export interface CorruptedAnswer {
  key: string;
  range: string | undefined;
  bytes: Uint8Array;
}

/** A running fault proxy. */
export interface FaultProxy {
  /** `http://127.0.0.1:PORT`, the store's endpoint. */
  endpoint: string;
  /** Flips one byte (the last) in the body of the next `n` successful `.log` GET answers. */
  corruptNext(n?: number): void;
  /** Flips one byte in the body of every successful `.log` GET answer until set back. */
  corruptAll(on: boolean): void;
  /** What `.log` GETs meet from now on; back to "forward" heals the proxy. */
  mode: LogGetMode;
  /** GETs of `.log` objects that reached the proxy. */
  readonly gets: number;
  /** Answers corrupted so far, oldest first. */
  readonly corrupted: readonly CorruptedAnswer[];
  /** `.log` GETs left unanswered ("silent") or stalled mid-body ("half a body"). */
  readonly stalled: number;
  /** Resets every open connection and stops listening. */
  close(): Promise<void>;
}

/** Starts a fault proxy on a free loopback port in front of `target` (`http://127.0.0.1:PORT`). */
export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const upstream = new URL(target);
  let corruptCount = 0;
  let corruptEvery = false;
  let mode: LogGetMode = "forward";
  let gets = 0;
  let stalled = 0;
  const corrupted: CorruptedAnswer[] = [];
  const sockets = new Set<Socket>();

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://proxy");
    const key = decodeURIComponent(url.pathname.split("/").slice(2).join("/"));
    const logGet = req.method === "GET" && key.endsWith(".log");
    if (logGet) gets++;
    if (logGet && mode === "silent") {
      stalled++;
      req.resume(); // read, never answered
      return;
    }
    const onDisconnect = () => forward.destroy();
    const forward = http.request({
      host: upstream.hostname,
      port: Number(upstream.port),
      method: req.method,
      path: req.url,
      headers: req.headers,
    }, (answer) => {
      const status = answer.statusCode ?? 502;
      if (!logGet || status < 200 || status >= 300) {
        res.writeHead(status, answer.headers);
        answer.pipe(res);
        answer.on("error", () => res.destroy());
        return;
      }
      // A `.log` GET answered: the whole body is taken first, then handed on as the mode says.
      const pieces: Uint8Array[] = [];
      answer.on("data", (piece: Uint8Array) => pieces.push(piece));
      answer.on("error", () => res.destroy());
      answer.on("end", () => {
        const body = concatBytes(pieces);
        if (mode === "half a body") {
          stalled++;
          res.writeHead(status, answer.headers);
          res.write(body.subarray(0, Math.floor(body.length / 2)));
          return; // and never the rest
        }
        if ((corruptEvery || corruptCount > 0) && body.length > 0) {
          if (!corruptEvery) corruptCount--;
          const bad = body.slice();
          bad[bad.length - 1] ^= 0x5a;
          corrupted.push({ key, range: req.headers.range, bytes: bad });
          res.writeHead(status, answer.headers);
          res.end(bad);
          return;
        }
        res.writeHead(status, answer.headers);
        res.end(body);
      });
    });
    // MinIO unreachable: the client's connection is dropped, as if it had reached MinIO itself.
    forward.on("error", () => res.destroy());
    req.on("error", onDisconnect);
    res.on("close", onDisconnect);
    req.pipe(forward);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    corruptNext: (n = 1) => void (corruptCount += n),
    corruptAll: (on) => void (corruptEvery = on),
    get mode() {
      return mode;
    },
    set mode(m: LogGetMode) {
      mode = m;
    },
    get gets() {
      return gets;
    },
    get corrupted() {
      return corrupted;
    },
    get stalled() {
      return stalled;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
