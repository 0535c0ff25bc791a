// `credential_process` from a shared config profile: the command runs through `/bin/sh -c`, and
// its stdout is the documented JSON (Version 1, AccessKeyId, SecretAccessKey, SessionToken,
// Expiration). Its stderr and stdout are never quoted in messages: they may hold the secret.
import { execFile } from "node:child_process";
import type { Credentials } from "../../s3/sigv4.ts";
import { expiryFrom, parseJsonObject, requireField, str } from "../../credentials/endpoint.ts";
import { CredentialError, type Expiring } from "../../credentials/types.ts";

/** How long the process may run. */
const PROCESS_TIMEOUT_MS = 60_000;

/**
 * Runs `command` and reads its credentials.
 * @param source the source's name for messages (`profile prod`)
 * @throws {CredentialError} when it fails, times out or prints something else
 */
export function runCredentialProcess(
  source: string,
  command: string,
  nowMs: number,
): Promise<Expiring<Credentials>> {
  const what = "credential_process";
  return new Promise((resolve, reject) => {
    execFile("/bin/sh", ["-c", command], {
      timeout: PROCESS_TIMEOUT_MS,
      maxBuffer: 1 << 20,
      encoding: "utf8",
    }, (err, stdout) => {
      if (err) {
        const code = (err as { code?: unknown }).code;
        return reject(
          new CredentialError(
            "Auth",
            source,
            `${what} failed (${err.killed ? "timed out" : `exit ${String(code ?? "?")}`})`,
            { code: "ProcessFailed" },
          ),
        );
      }
      const json = parseJsonObject(String(stdout).trim());
      if (!json) {
        return reject(
          new CredentialError("Malformed", source, `${what} printed no JSON object`, {
            code: "Malformed",
          }),
        );
      }
      if (json.Version !== 1) {
        return reject(
          new CredentialError(
            "Malformed",
            source,
            `${what} printed Version ${JSON.stringify(json.Version)}, not 1`,
            {
              code: "Malformed",
            },
          ),
        );
      }
      try {
        const expiration = str(json.Expiration);
        resolve({
          value: {
            accessKeyId: requireField(source, what, json, "AccessKeyId"),
            secretAccessKey: requireField(source, what, json, "SecretAccessKey"),
            sessionToken: str(json.SessionToken),
          },
          expiresAt: expiration ? expiryFrom(source, expiration, "date", nowMs) : undefined,
        });
      } catch (e) {
        reject(e);
      }
    });
  });
}
