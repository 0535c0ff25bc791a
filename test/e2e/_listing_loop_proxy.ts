// A proxy between tierd and MinIO whose ListObjectsV2 under a prefix never ends: it answers
// those listings itself, every page truncated, with a continuation token that repeats or one that
// keeps growing while the keys do not advance — a broken or hostile store. Every other request
// (the boot probe, HEADs, GETs, PUTs, listings elsewhere) is forwarded unchanged by the scripted
// proxy it is built on (./_s3_script_proxy.ts).
import { startScriptedS3Proxy } from "./_s3_script_proxy.ts";

/** How the fabricated listing loops. */
export type ListingLoopMode =
  /** Every page says the same continuation token; the keys advance page after page. */
  | "repeating token"
  /** The token grows by a character each page; every page lists the same key again. */
  | "growing token, same keys"
  /** The token grows by a character each page; no page holds a key. */
  | "growing token, empty pages";

/** A running listing-loop proxy. */
export interface ListingLoopProxy {
  /** `http://127.0.0.1:PORT`, the store's endpoint. */
  endpoint: string;
  /** Fabricated ListObjectsV2 pages answered so far. */
  readonly pages: number;
  close(): Promise<void>;
}

function xmlEscape(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * Starts a proxy in front of `target` (`http://127.0.0.1:PORT`) that answers every ListObjectsV2
 * of `prefix` (e.g. `iggy/local/`) or of a prefix under it with endless pages as `mode` says.
 */
export async function startListingLoopProxy(
  target: string,
  o: { bucket: string; prefix: string; mode: ListingLoopMode },
): Promise<ListingLoopProxy> {
  const proxy = await startScriptedS3Proxy(target);
  let pages = 0;
  proxy.script((r) => {
    const listed = r.query.get("prefix") ?? "";
    if (r.method !== "GET" || r.query.get("list-type") !== "2" || !listed.startsWith(o.prefix)) {
      return undefined; // forwarded
    }
    pages++;
    const token = r.query.get("continuation-token") ?? "";
    // Page n (1-based) is the one asked for with the token page n-1 handed out.
    const n = o.mode === "repeating token" ? pages : token.length + 1;
    const next = o.mode === "repeating token" ? "loop-token" : `t${"x".repeat(n)}`;
    const keys = o.mode === "repeating token"
      ? [`${listed}00000000000000ab-0/${String(n * 100).padStart(20, "0")}.log`]
      : o.mode === "growing token, same keys"
      ? [`${listed}00000000000000ab-0/00000000000000000000.log`]
      : [];
    const contents = keys.map((k) =>
      `<Contents><Key>${xmlEscape(k)}</Key><LastModified>2024-01-01T00:00:00.000Z` +
      `</LastModified><ETag>"d41d8cd98f00b204e9800998ecf8427e"</ETag><Size>1</Size>` +
      `<StorageClass>STANDARD</StorageClass></Contents>`
    ).join("");
    return {
      kind: "answer",
      status: 200,
      headers: { "content-type": "application/xml" },
      body: `<?xml version="1.0" encoding="UTF-8"?>\n` +
        `<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
        `<Name>${xmlEscape(o.bucket)}</Name><Prefix>${xmlEscape(listed)}</Prefix>` +
        `<KeyCount>${keys.length}</KeyCount><MaxKeys>1000</MaxKeys>` +
        (token ? `<ContinuationToken>${xmlEscape(token)}</ContinuationToken>` : "") +
        `<NextContinuationToken>${xmlEscape(next)}</NextContinuationToken>` +
        `<IsTruncated>true</IsTruncated>${contents}</ListBucketResult>`,
    };
  });
  return {
    endpoint: proxy.endpoint,
    get pages() {
      return pages;
    },
    close: proxy.close,
  };
}
