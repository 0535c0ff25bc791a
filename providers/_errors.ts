// How the HTTP stores (S3, GCS, Azure) turn an answer into tierd's typed error the same way: the
// statuses every service means alike, the shape of the message, an unreadable answer and a
// refused continuation token. What each service's own codes mean stays in its responses.ts.
import { snippet } from "./_xml.ts";
import { StoreError, type StoreErrorKind } from "./types.ts";

/** `op` or `op key`: how messages name the call that failed. */
export function where(op: string, key: string | undefined): string {
  return key === undefined ? op : `${op} ${key}`;
}

/**
 * The kind of an error answer as far as every service agrees: the service's own table decides
 * when it knows the code, else {@link statusKind}. Undefined for what each service reads its own
 * way.
 */
export function answerKind(
  codeKinds: Readonly<Record<string, StoreErrorKind>>,
  code: string,
  status: number,
): StoreErrorKind | undefined {
  const byCode = codeKinds[code];
  if (byCode) return byCode;
  return statusKind(status);
}

/**
 * The kind of an error status that every service means the same way: 429 and 503 throttling,
 * other 5xx transport faults (501: unsupported), 401 and 403 auth, 404, 412 and 416. Undefined
 * for the statuses each service reads its own way (redirects, 400, 408, 409, other 4xx).
 */
function statusKind(status: number): StoreErrorKind | undefined {
  if (status === 429 || status === 503) return "Throttled";
  if (status >= 500) return status === 501 ? "Unsupported" : "Transport";
  if (status === 401 || status === 403) return "Auth";
  if (status === 404) return "NotFound";
  if (status === 412) return "PreconditionFailed";
  if (status === 416) return "InvalidRange";
  return undefined;
}

/** What every service's error answer carries. */
export interface ErrorAnswer {
  code: string;
  status: number;
  message: string;
}

/**
 * The typed error for a service's error answer, its message
 * `{op} {key}: {status} {code}: {message}{hint}` scrubbed by `redact`.
 * @param kind what the service's table makes of the code and status
 * @param context `cause`: the service's answer, already scrubbed
 */
export function answerError(
  kind: StoreErrorKind,
  info: ErrorAnswer,
  context: {
    op: string;
    key: string | undefined;
    redact: (text: string) => string;
    hint?: string;
    cause: Error;
  },
): StoreError {
  const { op, key } = context;
  return new StoreError(
    kind,
    context.redact(
      `${where(op, key)}: ${info.status} ${info.code}: ${info.message}${context.hint ?? ""}`,
    ),
    { op, key, status: info.status, code: info.code },
    { cause: context.cause },
  );
}

/** A `Malformed` error (code `Malformed`) for an answer tierd could not read; `text` is quoted. */
export function malformed(op: string, key: string | undefined, why: string, text = ""): StoreError {
  return new StoreError(
    "Malformed",
    `${where(op, key)}: ${why}${text ? `: ${snippet(text)}` : ""}`,
    {
      op,
      key,
      code: "Malformed",
    },
  );
}

/**
 * A conditional replace's refusal as `PreconditionFailed`: the store's own error when it says so,
 * else (the object is gone: nothing to replace) that error rewritten to the kind, with `condition`
 * (e.g. "If-Match: no object to replace") added to its message.
 */
export function replaceFailed(err: StoreError, condition: string): StoreError {
  if (err.kind === "PreconditionFailed") return err;
  return new StoreError("PreconditionFailed", `${err.message} (${condition})`, err.detail, {
    cause: err.cause,
  });
}

/**
 * Runs one listing request. When the service refuses the continuation token — a 400, with
 * `refusalCode` when the service also answers other 400s — throws what the contract says (and
 * fs and sim answer a token they did not hand out): `Malformed` with code `InvalidToken`.
 * @param continuationToken the token the listing resumes from, if any
 */
export async function listingFrom<T>(
  continuationToken: string | undefined,
  list: () => Promise<T>,
  options: { refusalCode?: string } = {},
): Promise<T> {
  try {
    return await list();
  } catch (err) {
    if (
      continuationToken && err instanceof StoreError && err.detail.status === 400 &&
      (options.refusalCode === undefined || err.detail.code === options.refusalCode)
    ) {
      throw new StoreError("Malformed", `continuation token is not valid: ${err.message}`, {
        op: "list",
        status: 400,
        code: "InvalidToken",
      }, { cause: err });
    }
    throw err;
  }
}
