// An XML parse that keeps attributes, for the few answers that carry data in them (Azure's
// `<Name Encoded="true">` in blob listings). Same strictness and entity handling as ./_xml.ts;
// attributes appear as `@name` string children.
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { snippet, type XmlNode, XmlSyntaxError, xmlUnescape } from "./_xml.ts";

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "@",
  parseAttributeValue: false,
  parseTagValue: false,
  trimValues: false,
  processEntities: false,
  removeNSPrefix: true,
  ignoreDeclaration: true,
  ignorePiTags: true,
  tagValueProcessor: (_name: string, value: string) => xmlUnescape(value),
  attributeValueProcessor: (_name: string, value: string) => xmlUnescape(value),
});

/**
 * Parses an XML document into plain objects, attributes included as `@name` keys.
 * @throws {XmlSyntaxError} when the text is empty or not well-formed
 */
export function parseXmlWithAttributes(text: string): XmlNode {
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  const valid = XMLValidator.validate(text);
  if (valid !== true) throw new XmlSyntaxError(`malformed XML: ${valid.err.msg}`, snippet(text));
  let doc: unknown;
  try {
    doc = parser.parse(text);
  } catch (err) {
    throw new XmlSyntaxError(`malformed XML: ${(err as Error).message}`, snippet(text));
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw new XmlSyntaxError("malformed XML: no root element", snippet(text));
  }
  return doc as XmlNode;
}
