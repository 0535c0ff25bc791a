// A test helper that mints an account SAS (service version 2020-12-06+ string to sign) from the
// account key, so tests can run the store with `sasToken` the way an operator would configure it.
import { Buffer } from "node:buffer";

/** Options of {@link accountSas}. */
export interface AccountSasOptions {
  account: string;
  /** The account key, base64. */
  key: string;
  /** @default "rwdlac" */
  permissions?: string;
  /** @default one hour from now */
  expiry?: Date;
  /** @default "2022-11-02" */
  version?: string;
}

function isoSeconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** An account SAS for the blob service (`ss=b`, `srt=sco`), as a query string without `?`. */
export async function accountSas(options: AccountSasOptions): Promise<string> {
  const permissions = options.permissions ?? "rwdlac";
  const expiry = isoSeconds(options.expiry ?? new Date(Date.now() + 3600_000));
  const version = options.version ?? "2022-11-02";
  const toSign = [
    options.account,
    permissions,
    "b",
    "sco",
    "",
    expiry,
    "",
    "https,http",
    version,
    "",
    "",
  ]
    .join("\n");
  const key = await crypto.subtle.importKey(
    "raw",
    Uint8Array.from(Buffer.from(options.key, "base64")),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const sig = Buffer.from(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(toSign)))
    .toString("base64");
  const params: Array<[string, string]> = [
    ["sv", version],
    ["ss", "b"],
    ["srt", "sco"],
    ["sp", permissions],
    ["se", expiry],
    ["spr", "https,http"],
    ["sig", sig],
  ];
  return params.map(([n, v]) => `${n}=${encodeURIComponent(v)}`).join("&");
}
