// A store that refuses S3's checksum headers the way Backblaze B2 answers its users, made of the
// scripted proxy in front of MinIO: any request carrying `x-amz-checksum-*` (a body's checksum,
// CreateMultipartUpload's algorithm and type, a HEAD's `x-amz-checksum-mode`) or
// `x-amz-sdk-checksum-algorithm` gets `400 InvalidArgument: Unsupported header '…' received for
// this API call.`, before it reaches MinIO; everything else is forwarded unchanged. What it
// refused, and the `Content-MD5` headers it let through, are counted.
import { startScriptedS3Proxy } from "./_s3_script_proxy.ts";

/** A running refusing proxy. */
export interface RefusingProxy {
  /** `http://127.0.0.1:PORT`, the store's endpoint. */
  endpoint: string;
  /** Requests refused so far, as `METHOD header`. */
  readonly refused: readonly string[];
  /** Requests forwarded to MinIO with a `Content-MD5`. */
  readonly contentMd5s: number;
  close(): Promise<void>;
}

/** True for a header B2 refuses on object operations. */
function refusedHeader(name: string): boolean {
  return name.startsWith("x-amz-checksum-") || name === "x-amz-sdk-checksum-algorithm";
}

/** Starts the proxy on a free loopback port in front of `target` (`http://127.0.0.1:PORT`). */
export async function startRefusingProxy(target: string): Promise<RefusingProxy> {
  const proxy = await startScriptedS3Proxy(target);
  const refused: string[] = [];
  let contentMd5s = 0;
  proxy.script((r) => {
    const bad = r.headerNames.find(refusedHeader);
    if (!bad) {
      if (r.headerNames.includes("content-md5")) contentMd5s++;
      return undefined;
    }
    refused.push(`${r.method} ${bad}`);
    return {
      kind: "answer",
      status: 400,
      headers: { "content-type": "application/xml" },
      body: '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Error>\n' +
        "    <Code>InvalidArgument</Code>\n" +
        `    <Message>Unsupported header '${bad}' received for this API call.</Message>\n` +
        "</Error>\n",
    };
  });
  return {
    endpoint: proxy.endpoint,
    refused,
    get contentMd5s() {
      return contentMd5s;
    },
    close: () => proxy.close(),
  };
}
