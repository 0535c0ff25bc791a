// An XML parse that keeps attributes, for the few answers that carry data in them (Azure's
// `<Name Encoded="true">` in blob listings). Same strictness and entity handling as ./_xml.ts;
// attributes appear as `@name` string children.
import { XMLParser } from "fast-xml-parser";
import { parseWith, STRICT_PARSE_OPTIONS, type XmlNode, xmlUnescape } from "./_xml.ts";

const parser = new XMLParser({
  ...STRICT_PARSE_OPTIONS,
  ignoreAttributes: false,
  attributeNamePrefix: "@",
  parseAttributeValue: false,
  attributeValueProcessor: (_name: string, value: string) => xmlUnescape(value),
});

/**
 * Parses an XML document into plain objects, attributes included as `@name` keys.
 * @throws {XmlSyntaxError} when the text is empty or not well-formed
 */
export function parseXmlWithAttributes(text: string): XmlNode {
  return parseWith(parser, text);
}
