// The least a caching read agent can do, as a program of its own: the machine's own limit for
// tierd's cold scan (bench/read_scan.ts runs it under Bun, the runtime of the shipped binary).
// `GET /{i}` fetches the i-th URL of a list (a presigned GET of one evicted `.log` object) and
// streams its body to the client piece by piece as it arrives, and, as a chunk cache does, keeps
// every 8 MiB of it as a new file (`.part`, then renamed), written as tierd writes its chunk files
// (around the page cache where the file system allows: src/base/file_write.ts). Nothing is
// parsed, hashed, checked or planned, and no read is cut at record boundaries: what it costs per
// GiB is the fetch, the file writes and the socket, which tierd cannot do without.
//
// Usage: caching_relay.ts <file of URLs, one per line> <cache directory>
// Prints `listening <port>` once it answers, on a loopback port of its own.
import { createServer } from "node:http";
import { mkdir, readFile, rename } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { writeNewFileDirect } from "../src/base/file_write.ts";

/** Bytes per cache file, as tierd's default chunk size. */
const CHUNK_BYTES = 8 * 1024 * 1024;

const [urlsFile, cacheDir] = process.argv.slice(2);
if (!urlsFile || !cacheDir) {
  console.error("usage: caching_relay.ts <file of URLs> <cache directory>");
  process.exit(2);
}
const urls = (await readFile(urlsFile, "utf8")).trim().split("\n");
await mkdir(cacheDir, { recursive: true });
let files = 0;

/** Writes `bytes` as a new cache file: `.part`, then renamed, as tierd's chunk store does. */
async function keep(bytes: Uint8Array): Promise<void> {
  const name = join(cacheDir, `c${files++}`);
  await writeNewFileDirect(`${name}.part`, new Uint8Array(0), bytes);
  await rename(`${name}.part`, `${name}.chunk`);
}

const server = createServer(async (req, res) => {
  const url = urls[Number((req.url ?? "").slice(1))];
  const upstream = url ? await fetch(url) : undefined;
  if (!upstream || upstream.status !== 200 || !upstream.body) {
    res.writeHead(502).end(`no such object, or the store answered ${upstream?.status}`);
    return;
  }
  res.writeHead(200, { "content-type": "application/octet-stream" });
  let chunk = new Uint8Array(CHUNK_BYTES);
  let filled = 0;
  for await (const piece of upstream.body) {
    for (let at = 0; at < piece.byteLength;) {
      const n = Math.min(CHUNK_BYTES - filled, piece.byteLength - at);
      chunk.set(piece.subarray(at, at + n), filled);
      filled += n;
      at += n;
      if (filled === CHUNK_BYTES) {
        await keep(chunk);
        chunk = new Uint8Array(CHUNK_BYTES);
        filled = 0;
      }
    }
    if (!res.write(piece)) await new Promise((drained) => res.once("drain", drained));
  }
  if (filled > 0) await keep(chunk.subarray(0, filled));
  res.end();
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  console.log(`listening ${typeof address === "object" && address ? address.port : 0}`);
});
