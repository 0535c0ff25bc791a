// The naming rules of the values that end up in object keys and store URLs: bucket, container
// and account names per provider, key prefixes and key segments, and the Azure account key's
// base64. Each check returns why a value breaks its rule (to follow "expected …" in a
// ConfigError), or undefined when it is fine.

/** What a key prefix may look like, for error messages. */
export const PREFIX_EXPECTED =
  'a key prefix of letters, digits, ".", "_", "-", with inner "/" only and no "." or ".." ' +
  'segment, like "iggy"';

/** What a single object key segment (`cluster_id`) may look like, for error messages. */
export const KEY_SEGMENT_EXPECTED =
  'an object key segment of letters, digits, ".", "_", "-" (not "." or ".."), like "local"';

const SEGMENT = /^[A-Za-z0-9._-]+$/;

/** Why `segment` is not one object key segment, or undefined. */
export function keySegmentProblem(segment: string): string | undefined {
  if (!SEGMENT.test(segment)) return 'it has a character other than letters, digits, ".", "_", "-"';
  if (segment === "." || segment === "..") return `${JSON.stringify(segment)} is a path step`;
  return undefined;
}

/**
 * Why `prefix` is not a key prefix every store treats the same way (no empty, `.` or `..`
 * segment, no leading or trailing `/`), or undefined.
 */
export function prefixProblem(prefix: string): string | undefined {
  if (prefix === "") return "it is empty";
  if (prefix.startsWith("/")) return 'it starts with "/"';
  if (prefix.endsWith("/")) return 'it ends with "/"';
  for (const segment of prefix.split("/")) {
    if (segment === "") return 'it has an empty segment ("//")';
    const why = keySegmentProblem(segment);
    if (why) return why;
  }
  return undefined;
}

const IPV4 = /^\d{1,3}(\.\d{1,3}){3}$/;

/** What an S3 bucket name may look like, for error messages. */
export const S3_BUCKET_EXPECTED =
  'an S3 bucket name: 3–63 lowercase letters, digits, "." and "-", starting and ending with a ' +
  'letter or digit, no "..", not an IP address';

/** Why `name` is not an S3 bucket name (AWS's general purpose bucket rules), or undefined. */
export function s3BucketProblem(name: string): string | undefined {
  if (name.length < 3 || name.length > 63) return `it is ${name.length} characters long`;
  if (!/^[a-z0-9.-]+$/.test(name)) return 'it has a character other than a-z, 0-9, "." and "-"';
  if (!/^[a-z0-9].*[a-z0-9]$/.test(name)) return "it does not start and end with a letter or digit";
  if (name.includes("..")) return 'it has ".."';
  if (IPV4.test(name)) return "it is an IP address";
  if (name.startsWith("xn--")) return 'it starts with "xn--"';
  if (name.endsWith("-s3alias") || name.endsWith("--ol-s3")) return "it has a reserved suffix";
  return undefined;
}

/** What a GCS bucket name may look like, for error messages. */
export const GCS_BUCKET_EXPECTED =
  'a GCS bucket name: 3–63 lowercase letters, digits, "-", "_" and "." (up to 222 with dots, ' +
  '63 between them), starting and ending with a letter or digit, not an IP address, no "goog" ' +
  'prefix, no "google"';

/** Why `name` is not a Google Cloud Storage bucket name, or undefined. */
export function gcsBucketProblem(name: string): string | undefined {
  if (!/^[a-z0-9._-]+$/.test(name)) {
    return 'it has a character other than a-z, 0-9, "-", "_" and "."';
  }
  const max = name.includes(".") ? 222 : 63;
  if (name.length < 3 || name.length > max) return `it is ${name.length} characters long`;
  if (!/^[a-z0-9].*[a-z0-9]$/.test(name)) return "it does not start and end with a letter or digit";
  const parts = name.split(".");
  if (parts.some((p) => p === "")) return 'it has ".."';
  if (parts.some((p) => p.length > 63)) return "a part between dots is over 63 characters";
  if (IPV4.test(name)) return "it is an IP address";
  if (name.startsWith("goog")) return 'it starts with "goog"';
  if (name.includes("google")) return 'it contains "google"';
  return undefined;
}

/** What an Azure storage account name may look like, for error messages. */
export const AZURE_ACCOUNT_EXPECTED =
  "an Azure storage account name: 3–24 lowercase letters and digits";

/** Why `name` is not an Azure storage account name, or undefined. */
export function azureAccountProblem(name: string): string | undefined {
  if (name.length < 3 || name.length > 24) return `it is ${name.length} characters long`;
  if (!/^[a-z0-9]+$/.test(name)) return "it has a character other than a-z and 0-9";
  return undefined;
}

/** What an Azure container name may look like, for error messages. */
export const AZURE_CONTAINER_EXPECTED =
  'an Azure container name: 3–63 lowercase letters, digits and "-", starting and ending with a ' +
  'letter or digit, no "--"';

/** Why `name` is not an Azure blob container name, or undefined. */
export function azureContainerProblem(name: string): string | undefined {
  if (name.length < 3 || name.length > 63) return `it is ${name.length} characters long`;
  if (!/^[a-z0-9-]+$/.test(name)) return 'it has a character other than a-z, 0-9 and "-"';
  if (!/^[a-z0-9].*[a-z0-9]$/.test(name)) return "it does not start and end with a letter or digit";
  if (name.includes("--")) return 'it has "--"';
  return undefined;
}

/** What an Azure account key must be, for error messages. */
export const AZURE_KEY_EXPECTED = "the account key in base64, as the Azure portal shows it";

/**
 * Why `key` is not base64 (the alphabet `A–Z a–z 0–9 + /`, `=` padding, a multiple of 4
 * characters; surrounding whitespace ignored, as the Azure store does), or undefined. Never
 * quotes the key.
 */
export function base64Problem(key: string): string | undefined {
  const trimmed = key.trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(trimmed)) {
    return "it has a character outside the base64 alphabet";
  }
  if (trimmed.length % 4 !== 0) return "its length is not a multiple of 4";
  return undefined;
}
