// XML plumbing shared by the S3, GCS and Azure providers: a strict parse (malformed bodies are
// reported, never half-read), typed accessors, and escaping for request bodies.
import { XMLParser, XMLValidator } from "fast-xml-parser";

/** A parsed XML element: child elements by name (repeated names become arrays), text as strings. */
export type XmlNode = { [name: string]: XmlValue };
export type XmlValue = string | XmlNode | XmlValue[];

/** Thrown when a body is not well-formed XML; `snippet` is the start of the body, for messages. */
export class XmlSyntaxError extends Error {
  override readonly name = "XmlSyntaxError";
  constructor(message: string, readonly snippet: string) {
    super(message);
  }
}

/**
 * The parser options every XML parse here uses: text kept as is, namespaces dropped. Entities
 * are decoded by hand (`xmlUnescape`) so numeric references such as `&#13;` come out as
 * characters and no DOCTYPE-defined entity is ever expanded.
 */
export const STRICT_PARSE_OPTIONS = {
  parseTagValue: false,
  trimValues: false,
  processEntities: false,
  removeNSPrefix: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  tagValueProcessor: (_name: string, value: string) => xmlUnescape(value),
};

const parser = new XMLParser({ ignoreAttributes: true, ...STRICT_PARSE_OPTIONS });

const decoder = new TextDecoder("utf-8", { fatal: false });

/** Decodes a UTF-8 body, dropping a byte-order mark (Azure sends one). */
export function decodeText(body: Uint8Array): string {
  const text = decoder.decode(body);
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/** First `max` characters of a body, single-lined, for error messages. */
export function snippet(text: string, max = 120): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? flat.slice(0, max) + "…" : flat;
}

/**
 * Parses an XML document into plain objects.
 * @throws {XmlSyntaxError} when the text is empty or not well-formed.
 */
export function parseXml(text: string): XmlNode {
  return parseWith(parser, text);
}

/**
 * Parses an XML document with `xmlParser` (one built on {@link STRICT_PARSE_OPTIONS}): a
 * leading byte-order mark dropped, the text validated first so nothing is half-read.
 * @throws {XmlSyntaxError} when the text is empty or not well-formed.
 */
export function parseWith(xmlParser: XMLParser, text: string): XmlNode {
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const valid = XMLValidator.validate(text);
  if (valid !== true) {
    throw new XmlSyntaxError(`malformed XML: ${valid.err.msg}`, snippet(text));
  }
  let doc: unknown;
  try {
    doc = xmlParser.parse(text);
  } catch (err) {
    throw new XmlSyntaxError(`malformed XML: ${(err as Error).message}`, snippet(text));
  }
  if (!isNode(doc)) throw new XmlSyntaxError("malformed XML: no root element", snippet(text));
  return doc;
}

/**
 * The `<Error>` element of an error answer's body (S3 and Azure send one). For a body that is
 * not such a document, `unparsed` holds its start, for the message; an empty body gives neither.
 */
export function errorElement(body: Uint8Array): { error?: XmlNode; unparsed: string } {
  const text = body.byteLength > 0 ? decodeText(body) : "";
  if (!text.trim()) return { unparsed: "" };
  try {
    const error = rootElement(parseXml(text), "Error");
    return error ? { error, unparsed: "" } : { unparsed: snippet(text) };
  } catch (err) {
    if (!(err instanceof XmlSyntaxError)) throw err;
    return { unparsed: err.snippet };
  }
}

function isNode(value: unknown): value is XmlNode {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The root element named `name`, or undefined when the document's root is something else. */
export function rootElement(doc: XmlNode, name: string): XmlNode | undefined {
  const root = doc[name];
  if (isNode(root)) return root;
  if (root === "") return {}; // `<Name/>`: an empty element
  return undefined;
}

/** The child elements named `name`, as a list (absent → empty). */
export function children(node: XmlNode, name: string): XmlNode[] {
  const value = node[name];
  if (value === undefined) return [];
  const list = Array.isArray(value) ? value : [value];
  return list.map((v) => (isNode(v) ? v : {}));
}

/** The text of the first child element named `name`, or undefined when absent. */
export function childText(node: XmlNode, name: string): string | undefined {
  let value = node[name];
  if (Array.isArray(value)) value = value[0];
  if (value === undefined) return undefined;
  if (typeof value === "string") return value;
  // An element holding only whitespace-separated children has no text of its own.
  const text = (value as XmlNode)["#text"];
  return typeof text === "string" ? text : "";
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
  "\r": "&#13;",
};

/** Escapes text for an XML element body (`\r` as a character reference so it survives parsing). */
export function xmlEscape(text: string): string {
  return /[&<>"'\r]/.test(text) ? text.replace(/[&<>"'\r]/g, (c) => ESCAPES[c]) : text;
}

/** True when `text` can be carried in an XML 1.0 document at all (no C0 controls but tab/LF/CR). */
export function xmlRepresentable(text: string): boolean {
  // deno-lint-ignore no-control-regex
  return !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/.test(text) &&
    !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);
}

const NAMED: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** Decodes the five XML entities and numeric character references. */
export function xmlUnescape(text: string): string {
  if (!text.includes("&")) return text;
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|amp|lt|gt|quot|apos);/g, (whole, ref: string) => {
    if (ref[0] !== "#") return NAMED[ref];
    const code = ref[1] === "x" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
    return code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
}
