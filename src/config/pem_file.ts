// PEM files the config names (certificates, keys, CAs): read as text, a file that cannot be read
// is an error naming the config key and the path.
import { readFile } from "node:fs/promises";

/** A PEM file named by the config could not be read. */
export class PemFileError extends Error {
  override readonly name = "PemFileError";
}

/**
 * The text of the PEM file at `path`, named by config key `key`.
 * @throws {PemFileError} naming the key, the path and why
 */
export async function readPemFile(path: string, key: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    throw new PemFileError(`${key}: cannot read ${path}: ${(err as Error).message}`);
  }
}
