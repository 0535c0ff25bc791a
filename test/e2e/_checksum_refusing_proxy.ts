// A proxy in front of MinIO that refuses S3's checksum headers the way Backblaze B2 answers its
// users: any request carrying `x-amz-checksum-*` (a body's checksum, CreateMultipartUpload's
// algorithm and type, a HEAD's `x-amz-checksum-mode`) or `x-amz-sdk-checksum-algorithm` gets
// `400 InvalidArgument: Unsupported header '…' received for this API call.`, before it reaches
// MinIO. Everything else is forwarded unchanged (the Host header included, so signatures made
// for the proxy's address verify at MinIO). It counts what it refused and which checksum headers
// reached MinIO, so a test can tell that nothing refused is sent again.
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";

/** A running refusing proxy. */
export interface RefusingProxy {
  /** `http://127.0.0.1:PORT`, the store's endpoint. */
  endpoint: string;
  /** Requests refused so far, as `METHOD header`. */
  readonly refused: readonly string[];
  /** Checksum-carrying headers forwarded to MinIO (`content-md5`), by name, with counts. */
  readonly forwardedChecksums: ReadonlyMap<string, number>;
  close(): Promise<void>;
}

/** True for a header B2 refuses on object operations. */
function refusedHeader(name: string): boolean {
  return name.startsWith("x-amz-checksum-") || name === "x-amz-sdk-checksum-algorithm";
}

/** Starts the proxy on a free loopback port in front of `target` (`http://127.0.0.1:PORT`). */
export async function startRefusingProxy(target: string): Promise<RefusingProxy> {
  const upstream = new URL(target);
  const refused: string[] = [];
  const forwardedChecksums = new Map<string, number>();
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const names = Object.keys(req.headers);
    const bad = names.find(refusedHeader);
    if (bad) {
      refused.push(`${req.method} ${bad}`);
      req.resume();
      const body = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Error>\n' +
        "    <Code>InvalidArgument</Code>\n" +
        `    <Message>Unsupported header '${bad}' received for this API call.</Message>\n` +
        "</Error>\n";
      res.writeHead(400, {
        "content-type": "application/xml",
        "content-length": Buffer.byteLength(body),
      });
      res.end(req.method === "HEAD" ? undefined : body);
      return;
    }
    for (const name of names) {
      if (name === "content-md5") {
        forwardedChecksums.set(name, (forwardedChecksums.get(name) ?? 0) + 1);
      }
    }
    const forward = http.request({
      host: upstream.hostname,
      port: Number(upstream.port),
      method: req.method,
      path: req.url,
      headers: req.headers,
    }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
      answer.on("error", () => res.destroy());
    });
    forward.on("error", () => res.destroy());
    res.on("close", () => forward.destroy());
    req.pipe(forward);
  });
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    refused,
    forwardedChecksums,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
