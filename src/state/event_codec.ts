// JSON body codec for journal events: bigints travel as decimal strings so u64 offsets, ids and
// timestamps keep full precision; decoding checks every field's type and range.
import type { JournalEvent, JournalEventType } from "./events.ts";

/** A journal record body that is not a valid event. */
export class EventDecodeError extends Error {
  /**
   * @param message What is wrong with the body.
   */
  constructor(message: string) {
    super(message);
    this.name = "EventDecodeError";
  }
}

type FieldKind = "u64" | "u64?" | "int" | "str" | "str?" | "hex128" | "cause";
type Fields<T extends JournalEventType> = {
  [K in Exclude<keyof Extract<JournalEvent, { type: T }>, "type">]-?: FieldKind;
};

// One row per event type; the mapped type makes the compiler insist every field is listed.
const SCHEMA: { [T in JournalEventType]: Fields<T> } = {
  incarnation: { incarnation: "u64", device: "int", inode: "int", at: "int" },
  generation: { generation: "u64", at: "int" },
  copy_started: { segment: "u64", generation: "u64", uploadId: "str?", at: "int" },
  multipart_started: { segment: "u64", generation: "u64", key: "str", uploadId: "str", at: "int" },
  copy_finished: {
    segment: "u64",
    generation: "u64",
    endOffset: "u64",
    size: "int",
    indexSize: "int",
    startTimestamp: "u64",
    endTimestamp: "u64",
    maxTimestamp: "u64",
    checksum: "hex128",
    at: "int",
  },
  dangling: { segment: "u64", generation: "u64", reason: "str", at: "int" },
  delete_started: { segment: "u64", generation: "u64", cause: "cause", at: "int" },
  delete_finished: { segment: "u64", generation: "u64", at: "int" },
  lost_before_upload: { segment: "u64", generation: "u64", endOffset: "u64?", at: "int" },
  floor: { generation: "u64", tieredUpTo: "u64", at: "int" },
  evicted: { segment: "u64", generation: "u64", at: "int" },
  unevicted: { segment: "u64", generation: "u64", at: "int" },
  hole: { segment: "u64", generation: "u64", endOffset: "u64?", reason: "str", at: "int" },
  retired: { incarnation: "u64", generation: "u64", reason: "str", at: "int" },
  retired_swept: { incarnation: "u64", generation: "u64", at: "int" },
};

const U64_MAX = (1n << 64n) - 1n;
const U128_MAX = (1n << 128n) - 1n;
const DECIMAL = /^(0|[1-9][0-9]*)$/;
const HEX128 = /^[0-9a-f]{32}$/;
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

function isEventType(type: unknown): type is JournalEventType {
  return typeof type === "string" && Object.hasOwn(SCHEMA, type);
}

/** Each event type's fields, listed once (decoding a journal asks for them per record). */
const FIELDS = new Map(
  Object.entries(SCHEMA).map(([type, fields]) => [type, Object.entries(fields)]),
) as Map<JournalEventType, [string, FieldKind][]>;

function fieldsOf(type: JournalEventType): [string, FieldKind][] {
  return FIELDS.get(type)!;
}

/**
 * Encodes an event as the UTF-8 JSON body of a journal record.
 *
 * @param event The event.
 * @returns The body bytes.
 * @throws {RangeError} If a field is out of range (bigints must be u64, numbers non-negative safe
 * integers, `checksum` a u128, `cause` a known cause).
 */
export function encodeEvent(event: JournalEvent): Uint8Array {
  // Field names come from SCHEMA[event.type], which lists exactly this event's fields.
  const source = event as unknown as Readonly<Record<string, unknown>>;
  const out: Record<string, string | number> = { type: event.type };
  for (const [name, kind] of fieldsOf(event.type)) {
    const value = source[name];
    const problem = checkValue(kind, value, "encode");
    if (problem !== undefined) throw new RangeError(`${event.type}.${name}: ${problem}`);
    if (value === undefined) continue;
    out[name] = kind === "hex128"
      ? (value as bigint).toString(16).padStart(32, "0")
      : typeof value === "bigint"
      ? value.toString(10)
      : value as string | number;
  }
  return encoder.encode(JSON.stringify(out));
}

/**
 * Decodes a journal record body.
 *
 * @param body The UTF-8 JSON bytes.
 * @returns The event, with bigints restored. Unknown extra keys are ignored.
 * @throws {EventDecodeError} If the body is not UTF-8 JSON of a known event type with valid fields.
 */
export function decodeEvent(body: Uint8Array): JournalEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(decoder.decode(body));
  } catch (err) {
    throw new EventDecodeError(`not UTF-8 JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new EventDecodeError("body is not a JSON object");
  }
  const source = parsed as Record<string, unknown>;
  const type = source.type;
  if (!isEventType(type)) throw new EventDecodeError(`unknown event type ${JSON.stringify(type)}`);
  const event: Record<string, unknown> = { type };
  for (const [name, kind] of fieldsOf(type)) {
    const raw = Object.hasOwn(source, name) ? source[name] : undefined;
    if (raw !== undefined && (kind === "u64" || kind === "u64?")) {
      // Parsed once: checking it is parsing it.
      const value = decodeU64(raw);
      if (typeof value === "string") throw new EventDecodeError(`${type}.${name}: ${value}`);
      event[name] = value;
      continue;
    }
    const problem = checkValue(kind, raw, "decode");
    if (problem !== undefined) throw new EventDecodeError(`${type}.${name}: ${problem}`);
    if (raw === undefined) continue;
    event[name] = kind === "hex128" ? BigInt("0x" + (raw as string)) : raw;
  }
  // Every field of this type's schema row was checked above, so the object is that event.
  return event as unknown as JournalEvent;
}

/** A u64 as the journal writes it (a decimal string): the value, or why it is not one. */
function decodeU64(value: unknown): bigint | string {
  if (typeof value !== "string" || !DECIMAL.test(value)) return "not a decimal string";
  const parsed = BigInt(value);
  return parsed > U64_MAX ? `${value} is not a u64` : parsed;
}

/** Returns why `value` is not valid for `kind`, or undefined. Bigints are strings when decoding. */
function checkValue(
  kind: FieldKind,
  value: unknown,
  mode: "encode" | "decode",
): string | undefined {
  if (value === undefined) {
    return kind === "u64?" || kind === "str?" ? undefined : "missing";
  }
  switch (kind) {
    case "u64":
    case "u64?": {
      if (mode === "encode") {
        if (typeof value !== "bigint") return "not a bigint";
        return value < 0n || value > U64_MAX ? `${value} is not a u64` : undefined;
      }
      const decoded = decodeU64(value);
      return typeof decoded === "string" ? decoded : undefined;
    }
    case "int":
      return typeof value === "number" && Number.isSafeInteger(value) && value >= 0
        ? undefined
        : `${String(value)} is not a non-negative safe integer`;
    case "str":
    case "str?":
      return typeof value === "string" ? undefined : "not a string";
    case "hex128":
      if (mode === "encode") {
        if (typeof value !== "bigint") return "not a bigint";
        return value < 0n || value > U128_MAX ? `${value} is not a u128` : undefined;
      }
      return typeof value === "string" && HEX128.test(value)
        ? undefined
        : "not 32 lowercase hex digits";
    case "cause":
      return value === "dangling" || value === "retention" ? undefined : "not a delete cause";
  }
}
