// The SharedKey signer against Azure's own: random sets of `x-ms-meta-*` headers (names mixing
// letters, digits, `_`, `-`, so `part1`/`part_1`, `index2`/`index_size` and `i0`/`i-x` meet)
// signed by `@azure/storage-blob`'s StorageSharedKeyCredential policy and by tierd must carry the
// same Authorization header — the culture-aware header order included.
import assert from "node:assert/strict";
import fc from "fast-check";
import { StorageSharedKeyCredential } from "@azure/storage-blob";
import {
  authorization,
  compareHeaderNames,
  importAccountKey,
} from "../../../providers/azure/sharedkey.ts";
import { AZURITE_KEY } from "../../fixtures/azurite.ts";

/** The request shape the SDK's credential policy signs (a WebResource, reduced). */
class SdkHeaders {
  readonly #map = new Map<string, { name: string; value: string }>();
  set(name: string, value: string | number): void {
    this.#map.set(name.toLowerCase(), { name, value: String(value) });
  }
  get(name: string): string | undefined {
    return this.#map.get(name.toLowerCase())?.value;
  }
  headersArray(): { name: string; value: string }[] {
    return [...this.#map.values()];
  }
}

interface SdkPolicy {
  signRequest(request: { url: string; method: string; headers: SdkHeaders; body?: string }): void;
}

const ACCOUNT = "devstoreaccount1";
const credential = new StorageSharedKeyCredential(ACCOUNT, AZURITE_KEY);
const policy = credential.create(
  { sendRequest: () => Promise.reject(new Error("not sent")) },
  { log: () => {}, shouldLog: () => false },
) as unknown as SdkPolicy;

/** SDK and tierd signatures of one PUT carrying `meta` as x-ms-meta-* headers. */
async function both(meta: Record<string, string>): Promise<[string, string]> {
  const path = "/devstoreaccount1/tier/a%20b.log";
  const headers = new SdkHeaders();
  headers.set("x-ms-version", "2024-11-04");
  headers.set("x-ms-blob-type", "BlockBlob");
  headers.set("content-length", "5");
  headers.set("content-type", "application/octet-stream");
  for (const [k, v] of Object.entries(meta)) headers.set(`x-ms-meta-${k}`, v);
  const request = { url: `http://127.0.0.1:10000${path}?timeout=30`, method: "PUT", headers };
  policy.signRequest(request);
  const sdk = headers.get("authorization")!;
  const ours: Record<string, string> = {};
  for (const h of headers.headersArray()) {
    if (h.name.toLowerCase() !== "authorization") ours[h.name.toLowerCase()] = h.value;
  }
  const tierd = await authorization(ACCOUNT, await importAccountKey(AZURITE_KEY), {
    method: "PUT",
    path,
    query: [["timeout", "30"]],
    headers: ours,
  });
  return [sdk, tierd];
}

Deno.test("sharedkey vs @azure/storage-blob: the names the issue names sign the same", async () => {
  for (
    const names of [
      ["part1", "part_1"],
      ["index2", "index_size"],
      ["i0", "i-x"],
      ["end-offset", "end_offset", "endoffset", "end0"],
      ["xxh3-128", "tierd-version", "size", "index-size", "format"],
    ]
  ) {
    const meta = Object.fromEntries(names.map((n, i) => [n, `v${i}`]));
    const [sdk, tierd] = await both(meta);
    assert.equal(tierd, sdk, `names ${names.join(", ")}`);
  }
  assert.ok(compareHeaderNames("x-ms-meta-part_1", "x-ms-meta-part1") < 0, "_ before digits");
  assert.ok(compareHeaderNames("x-ms-meta-i0", "x-ms-meta-i-x") < 0, "- weighs nothing first");
});

Deno.test("sharedkey vs @azure/storage-blob: random x-ms-meta-* header sets sign the same", async () => {
  const name = fc.string({
    unit: fc.constantFrom(..."abcdefghij0123456789_-"),
    minLength: 1,
    maxLength: 8,
  }).filter((n) => /^[a-z_]/.test(n));
  await fc.assert(
    fc.asyncProperty(fc.uniqueArray(name, { minLength: 1, maxLength: 8 }), async (names) => {
      const [sdk, tierd] = await both(
        Object.fromEntries(names.map((n) => [n, n.length.toString()])),
      );
      assert.equal(tierd, sdk, `names ${JSON.stringify(names)}`);
    }),
    { numRuns: 300 },
  );
});
