// Path helpers for scripts (node:path plus file URL conversion).
import { fileURLToPath } from "node:url";
export { dirname, join } from "node:path";

/** Converts a `file:` URL to a path. */
export function fromFileUrl(url: string | URL): string {
  return fileURLToPath(url);
}
