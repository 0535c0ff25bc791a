// A scripted proxy between tierd and MinIO: every request is forwarded unchanged (Host header
// included, so SigV4 signatures still verify) unless the test's script answers it itself — a
// status and body of its own (a 404 NoSuchKey, a listing page), after as long a wait as the
// script takes — or rewrites MinIO's answer before it is passed on. What reached the proxy is
// kept, by S3 operation, for the assertions.
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { concatBytes } from "../../src/base/bytes.ts";
import { opOf, type S3Op } from "./_s3_tap.ts";

/** One request as the script sees it. */
export interface ProxiedRequest {
  method: string;
  op: S3Op;
  /** The object key (path after the bucket), "" for bucket-level calls. */
  key: string;
  query: URLSearchParams;
  /** Its header names, lowercase. */
  headerNames: readonly string[];
}

/** What the script makes of a request. */
export type ScriptAnswer =
  /** MinIO's answer, unchanged. */
  | { kind: "forward" }
  /** MinIO's answer with its body rewritten (a 2xx only; the content-length follows). */
  | { kind: "rewrite"; body: (body: string) => string }
  /** The proxy's own answer; MinIO never sees the request. */
  | { kind: "answer"; status: number; headers?: Record<string, string>; body?: string };

/** Decides a request's answer; may take its time (a slow store). undefined: forward. */
export type Script = (
  r: ProxiedRequest,
) => ScriptAnswer | undefined | Promise<ScriptAnswer | undefined>;

/** A running scripted proxy. */
export interface ScriptedS3Proxy {
  /** `http://127.0.0.1:PORT`, the store's endpoint. */
  endpoint: string;
  /** Sets the script (undefined: forward everything). */
  script(s: Script | undefined): void;
  /** Every request that reached the proxy, oldest first. */
  readonly seen: readonly ProxiedRequest[];
  /** Resets every open connection and stops listening. */
  close(): Promise<void>;
}

/** The XML of S3's `NoSuchKey`, as MinIO sends it. */
export function noSuchKey(bucket: string, key: string): ScriptAnswer {
  return {
    kind: "answer",
    status: 404,
    headers: { "content-type": "application/xml" },
    body: `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchKey</Code>` +
      `<Message>The specified key does not exist.</Message><Key>${key}</Key>` +
      `<BucketName>${bucket}</BucketName><Resource>/${bucket}/${key}</Resource></Error>`,
  };
}

/**
 * A ListObjectsV2 page of no keys that says more follow (`IsTruncated`), handing out `next` as
 * its continuation token.
 */
export function emptyTruncatedPage(bucket: string, prefix: string, next: string): ScriptAnswer {
  return {
    kind: "answer",
    status: 200,
    headers: { "content-type": "application/xml" },
    body: `<?xml version="1.0" encoding="UTF-8"?>\n` +
      `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>${bucket}</Name>` +
      `<Prefix>${encodeURIComponent(prefix)}</Prefix><KeyCount>0</KeyCount>` +
      `<MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>` +
      `<NextContinuationToken>${next}</NextContinuationToken></ListBucketResult>`,
  };
}

/**
 * Rewrites a last ListObjectsV2 page (MinIO's, `IsTruncated` false) into one that says more
 * follow, handing out `next` as its continuation token: its keys stay as they are.
 */
export function truncatedWith(next: string): ScriptAnswer {
  return {
    kind: "rewrite",
    body: (xml) => {
      if (!xml.includes("<IsTruncated>false</IsTruncated>")) {
        throw new Error(`not a last listing page: ${xml.slice(0, 300)}`);
      }
      return xml.replace(
        "<IsTruncated>false</IsTruncated>",
        `<IsTruncated>true</IsTruncated><NextContinuationToken>${next}</NextContinuationToken>`,
      );
    },
  };
}

/** Starts a scripted proxy on a free loopback port in front of `target` (`http://127.0.0.1:PORT`). */
export async function startScriptedS3Proxy(target: string): Promise<ScriptedS3Proxy> {
  const upstream = new URL(target);
  let script: Script | undefined;
  const seen: ProxiedRequest[] = [];
  const sockets = new Set<Socket>();

  const forward = (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Uint8Array,
    rewrite?: (text: string) => string,
  ) => {
    const up = http.request({
      host: upstream.hostname,
      port: Number(upstream.port),
      method: req.method,
      path: req.url,
      headers: req.headers,
    }, (answer) => {
      const status = answer.statusCode ?? 502;
      if (!rewrite || status < 200 || status >= 300) {
        res.writeHead(status, answer.headers);
        answer.pipe(res);
        answer.on("error", () => res.destroy());
        return;
      }
      const pieces: Uint8Array[] = [];
      answer.on("data", (p: Uint8Array) => pieces.push(p));
      answer.on("error", () => res.destroy());
      answer.on("end", () => {
        let out: Uint8Array;
        try {
          out = new TextEncoder().encode(rewrite(new TextDecoder().decode(concatBytes(pieces))));
        } catch {
          res.destroy();
          return;
        }
        const headers: http.OutgoingHttpHeaders = {
          ...answer.headers,
          "content-length": String(out.length),
        };
        delete headers["transfer-encoding"];
        delete headers["content-md5"];
        res.writeHead(status, headers);
        res.end(out);
      });
    });
    // MinIO unreachable: the client's connection is dropped, as if it had reached MinIO itself.
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    up.end(body);
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://proxy");
    const r: ProxiedRequest = {
      method: req.method ?? "GET",
      op: opOf(req.method ?? "GET", url.searchParams),
      key: decodeURIComponent(url.pathname.split("/").slice(2).join("/")),
      query: url.searchParams,
      headerNames: Object.keys(req.headers),
    };
    seen.push(r);
    // The request body is taken whole first (signed payloads are small in these tests).
    const pieces: Uint8Array[] = [];
    req.on("data", (p: Uint8Array) => pieces.push(p));
    req.on("error", () => res.destroy());
    req.on("end", async () => {
      let answer: ScriptAnswer | undefined;
      try {
        answer = await script?.(r);
      } catch {
        res.destroy();
        return;
      }
      if (res.destroyed || res.writableEnded) return;
      if (answer?.kind === "answer") {
        const body = new TextEncoder().encode(answer.body ?? "");
        res.writeHead(answer.status, {
          ...answer.headers,
          "content-length": String(body.length),
        });
        res.end(body);
        return;
      }
      forward(req, res, concatBytes(pieces), answer?.kind === "rewrite" ? answer.body : undefined);
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    script: (s) => void (script = s),
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
