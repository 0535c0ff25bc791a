// A small scanner over JSON text that finds where values are without turning them into JS
// values: the broker's answers carry u64/u128 numbers that `JSON.parse` would round, and its
// messages are spliced into tierd's answers as they came. Runtime-independent (Deno and Bun),
// unlike `JSON.parse` with source text access.

/** Where a value sits in the text: `text.slice(start, end)` is the value's own text. */
export interface Span {
  start: number;
  end: number;
}

/** The text is not the JSON shape the caller expected. */
export class JsonShapeError extends Error {
  override readonly name = "JsonShapeError";
  constructor(message: string, readonly at: number) {
    super(`${message} at character ${at}`);
  }
}

const WS = new Set([" ", "\t", "\n", "\r"]);

function skipWs(text: string, at: number): number {
  while (at < text.length && WS.has(text[at])) at++;
  return at;
}

/** The end of the string whose opening quote is at `at`. */
function stringEnd(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === '"') return i + 1;
  }
  throw new JsonShapeError("unterminated string", at);
}

/** The end of the value starting at `at` (no leading whitespace). */
function valueEnd(text: string, at: number): number {
  const c = text[at];
  if (c === '"') return stringEnd(text, at);
  if (c === "{" || c === "[") {
    let depth = 0;
    for (let i = at; i < text.length; i++) {
      const d = text[i];
      if (d === '"') {
        i = stringEnd(text, i) - 1;
      } else if (d === "{" || d === "[") depth++;
      else if (d === "}" || d === "]") {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    throw new JsonShapeError("unterminated object or array", at);
  }
  let i = at;
  while (i < text.length && !WS.has(text[i]) && !",]}".includes(text[i])) i++;
  if (i === at) throw new JsonShapeError("a value expected", at);
  return i;
}

/**
 * The members of the object at `span` (or the whole text), by key.
 * @throws {JsonShapeError} when it is not an object
 */
export function objectMembers(text: string, span?: Span): Map<string, Span> {
  let at = skipWs(text, span?.start ?? 0);
  if (text[at] !== "{") throw new JsonShapeError("an object expected", at);
  const out = new Map<string, Span>();
  at = skipWs(text, at + 1);
  if (text[at] === "}") return out;
  for (;;) {
    if (text[at] !== '"') throw new JsonShapeError("a key expected", at);
    const keyEnd = stringEnd(text, at);
    const key = JSON.parse(text.slice(at, keyEnd)) as string;
    at = skipWs(text, keyEnd);
    if (text[at] !== ":") throw new JsonShapeError('":" expected', at);
    at = skipWs(text, at + 1);
    const end = valueEnd(text, at);
    out.set(key, { start: at, end });
    at = skipWs(text, end);
    if (text[at] === ",") {
      at = skipWs(text, at + 1);
      continue;
    }
    if (text[at] === "}") return out;
    throw new JsonShapeError('"," or "}" expected', at);
  }
}

/**
 * The elements of the array at `span`.
 * @throws {JsonShapeError} when it is not an array
 */
export function arrayElements(text: string, span: Span): Span[] {
  let at = skipWs(text, span.start);
  if (text[at] !== "[") throw new JsonShapeError("an array expected", at);
  const out: Span[] = [];
  at = skipWs(text, at + 1);
  if (text[at] === "]") return out;
  for (;;) {
    const end = valueEnd(text, at);
    out.push({ start: at, end });
    at = skipWs(text, end);
    if (text[at] === ",") {
      at = skipWs(text, at + 1);
      continue;
    }
    if (text[at] === "]") return out;
    throw new JsonShapeError('"," or "]" expected', at);
  }
}

/**
 * The unsigned integer at `span`, exactly.
 * @throws {JsonShapeError} when the value is not a plain unsigned integer
 */
export function unsignedAt(text: string, span: Span): bigint {
  const raw = text.slice(span.start, span.end);
  if (!/^\d+$/.test(raw)) {
    throw new JsonShapeError(`an unsigned integer expected, got ${raw}`, span.start);
  }
  return BigInt(raw);
}

/**
 * The unsigned integer member `key` of the object at `span`.
 * @throws {JsonShapeError} when it is missing or not an unsigned integer
 */
export function unsignedMember(text: string, key: string, span?: Span): bigint {
  const member = objectMembers(text, span).get(key);
  if (!member) throw new JsonShapeError(`no "${key}"`, span?.start ?? 0);
  return unsignedAt(text, member);
}
