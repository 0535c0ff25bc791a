// PEM files the config names (certificates, keys, CAs): read as text, a file that cannot be read
// is an error naming the config key and the path; a certificate and its key checked to belong
// together before a listener serves with them.
import { createPrivateKey, X509Certificate } from "node:crypto";
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

/** A certificate or key that cannot serve: named, before any connection needs it. */
export class TlsPairError extends Error {
  override readonly name = "TlsPairError";
}

/**
 * `pair` when its certificate and key parse and belong together.
 * @throws {TlsPairError} naming which does not
 */
export function checkedPair(pair: { cert: string; key: string }): { cert: string; key: string } {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pair.cert);
  } catch (err) {
    throw new TlsPairError(`the certificate is not a PEM certificate: ${(err as Error).message}`);
  }
  let key;
  try {
    key = createPrivateKey(pair.key);
  } catch (err) {
    throw new TlsPairError(`the key is not a PEM private key: ${(err as Error).message}`);
  }
  if (!cert.checkPrivateKey(key)) {
    throw new TlsPairError(`the key is not the certificate's (subject ${cert.subject})`);
  }
  return pair;
}
