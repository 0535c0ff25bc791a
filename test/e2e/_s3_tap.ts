// A tap between the agent and MinIO: an HTTP proxy that names each S3 request (PutObject,
// UploadPart, CreateMultipartUpload, …) and calls a hook when it arrives and when MinIO's
// answer arrives, before the answer is passed on. Kill tests use it to SIGKILL the agent at an
// exact point, e.g. after MinIO created a multipart upload but before the agent heard of it.
// Headers (Host included) pass unchanged, so SigV4 signatures still verify.
import http from "node:http";

/** The S3 operation of a request, from its method and query. */
export type S3Op =
  | "CreateMultipartUpload"
  | "UploadPart"
  | "CompleteMultipartUpload"
  | "AbortMultipartUpload"
  | "DeleteObjects"
  | "ListMultipartUploads"
  | "ListObjectsV2"
  | "PutObject"
  | "HeadObject"
  | "GetObject"
  | "Other";

/** One request through the tap. */
export interface TapEvent {
  op: S3Op;
  /** The object key (path after the bucket), when there is one. */
  key: string;
  /** "request" when it arrives, "response" when MinIO's status is known (not yet forwarded). */
  phase: "request" | "response";
  /** MinIO's status; undefined when it could not be reached (the connection is dropped). */
  status?: number;
}

export interface S3Tap {
  /** `http://127.0.0.1:PORT`, to use as the agent's endpoint. */
  endpoint: string;
  /** Sets the one hook (undefined: none); it runs synchronously, before forwarding. */
  on(hook: ((e: TapEvent) => void) | undefined): void;
  /**
   * Cuts the network (true: every open connection is reset and new requests are dropped
   * unanswered, while MinIO keeps running) or restores it (false).
   */
  cut(down: boolean): void;
  close(): Promise<void>;
}

export function opOf(method: string, query: URLSearchParams): S3Op {
  if (method === "POST" && query.has("uploads")) return "CreateMultipartUpload";
  if (method === "PUT" && query.has("partNumber")) return "UploadPart";
  if (method === "POST" && query.has("uploadId")) return "CompleteMultipartUpload";
  if (method === "DELETE" && query.has("uploadId")) return "AbortMultipartUpload";
  if (method === "POST" && query.has("delete")) return "DeleteObjects";
  if (method === "GET" && query.has("uploads")) return "ListMultipartUploads";
  if (method === "GET" && query.has("list-type")) return "ListObjectsV2";
  if (method === "PUT") return "PutObject";
  if (method === "HEAD") return "HeadObject";
  if (method === "GET") return "GetObject";
  return "Other";
}

/** Starts a tap on a free port in front of `target` (`http://127.0.0.1:PORT`). */
export async function startS3Tap(target: string): Promise<S3Tap> {
  const upstream = new URL(target);
  let hook: ((e: TapEvent) => void) | undefined;
  let isCut = false;
  const sockets = new Set<import("node:net").Socket>();
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://tap");
    const op = opOf(req.method ?? "GET", url.searchParams);
    const key = decodeURIComponent(url.pathname.split("/").slice(2).join("/"));
    hook?.({ op, key, phase: "request" });
    if (isCut) {
      req.socket.destroy();
      return;
    }
    const forward = http.request({
      host: upstream.hostname,
      port: Number(upstream.port),
      method: req.method,
      path: req.url,
      headers: req.headers,
    }, (answer) => {
      hook?.({ op, key, phase: "response", status: answer.statusCode });
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
      answer.on("error", () => res.destroy());
    });
    // MinIO down: drop the agent's connection too, as if it had reached MinIO itself.
    forward.on("error", () => {
      hook?.({ op, key, phase: "response", status: undefined });
      res.destroy();
    });
    req.on("error", () => forward.destroy());
    res.on("close", () => forward.destroy());
    req.pipe(forward);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("tap has no port");
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    on: (h) => (hook = h),
    cut(down) {
      isCut = down;
      if (down) { for (const s of sockets) s.destroy(); }
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
