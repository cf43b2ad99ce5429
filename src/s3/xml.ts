// S3's XML: response documents written as text without a DOM, and request bodies parsed by
// fast-xml-parser within limits on size and depth.
//
// Invariants:
// - Every text and attribute value written goes through `escapeXml`; element names are the
//   adapter's own literals, never client input.
// - A request body over its limit is refused before it is parsed (`MaxMessageLengthExceeded`),
//   one nested deeper than XML_DEPTH_MAX or that is not well-formed XML is `MalformedXML`.
//   DOCTYPEs and entity declarations are refused, so no entity expansion happens.
//
// Persists: nothing.

import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { s3Error } from './errors.js';

export const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';
export const S3_NAMESPACE = 'http://s3.amazonaws.com/doc/2006-03-01/';
/** Bytes of an XML request body at most (S3 documents DeleteObjects' 1,000 keys in ~1 MiB). */
export const XML_BODY_BYTES_MAX = 2 * 1024 * 1024;
/** Element nesting of a request body at most; no S3 request document nests deeper than 6. */
export const XML_DEPTH_MAX = 16;

const escapes: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&apos;',
};

/**
 * Text as XML character data. Characters XML 1.0 cannot carry at all (controls other than tab,
 * CR and LF, and lone surrogates) are written as character references that S3 clients decode;
 * a key holding them is better listed with `encoding-type=url`.
 */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']|[\x00-\x08\x0B\x0C\x0E-\x1F]/g, (char) => {
    return escapes[char] ?? `&#x${char.charCodeAt(0).toString(16)};`;
  });
}

/**
 * Builds an XML document as a string: `open`/`close` for containers, `leaf` for text elements.
 * It checks its own nesting (a bug otherwise), so a handler cannot write a malformed document.
 */
export class XmlWriter {
  private document = XML_DECLARATION;
  private readonly open: string[] = [];

  /** Opens an element; the root gets S3's namespace unless `namespace` is false. */
  start(name: string, namespace = true): this {
    const ns = this.open.length === 0 && namespace ? ` xmlns="${S3_NAMESPACE}"` : '';
    this.document += `<${name}${ns}>`;
    this.open.push(name);
    return this;
  }

  /** Opens a nested element with attributes (`xsi:type` of an ACL's grantee). */
  startWith(name: string, attributes: Readonly<Record<string, string>>): this {
    const text = Object.entries(attributes)
      .map(([attribute, value]) => ` ${attribute}="${escapeXml(value)}"`)
      .join('');
    this.document += `<${name}${text}>`;
    this.open.push(name);
    return this;
  }

  end(name: string): this {
    const top = this.open.pop();
    if (top !== name) throw new TypeError(`XmlWriter: </${name}> closes <${top ?? ''}>`);
    this.document += `</${name}>`;
    return this;
  }

  /** `<name>value</name>`; nothing when the value is undefined. */
  leaf(name: string, value: string | number | boolean | undefined): this {
    if (value === undefined) return this;
    this.document += `<${name}>${escapeXml(String(value))}</${name}>`;
    return this;
  }

  /** Character data inside the element open now. */
  text(value: string): this {
    if (this.open.length === 0) throw new TypeError('XmlWriter: text outside an element');
    this.document += escapeXml(value);
    return this;
  }

  /** The finished document; every element must be closed. */
  toString(): string {
    if (this.open.length > 0) throw new TypeError(`XmlWriter: <${this.open.join('><')}> open`);
    return this.document;
  }
}

const parser = new XMLParser({
  ignoreAttributes: true,
  // Values stay strings: `<Key>0012</Key>` is a key, not a number.
  parseTagValue: false,
  trimValues: false,
  processEntities: true,
  htmlEntities: false,
  removeNSPrefix: true,
  ignoreDeclaration: true,
  // Lists are lists even with one element: callers read arrays where S3 allows several.
  isArray: () => false,
});

/** The parsed shape of an XML document: elements by name, repeated ones as arrays. */
export type XmlNode = { readonly [name: string]: XmlValue };
export type XmlValue = string | XmlNode | readonly XmlValue[];

/**
 * Parses an XML request body (already read whole, at most `limit` bytes). Answers `MalformedXML`
 * for anything that is not one well-formed document within XML_DEPTH_MAX levels, and for DTDs.
 */
export function parseXml(body: Buffer, limit = XML_BODY_BYTES_MAX): XmlNode {
  if (body.length > limit)
    throw s3Error('MaxMessageLengthExceeded', `XML bodies are limited to ${limit} bytes`);
  const text = body.toString('utf8');
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) throw s3Error('MalformedXML', 'DTDs are not accepted');
  if (depthOf(text) > XML_DEPTH_MAX)
    throw s3Error('MalformedXML', `XML bodies nest at most ${XML_DEPTH_MAX} levels`);
  // The parser itself is lenient (it reads `<a><b></a>`); the validator checks well-formedness.
  // It moves to its own package in a later release of fast-xml-parser.
  // eslint-disable-next-line @typescript-eslint/no-deprecated
  if (text.trim() === '' || XMLValidator.validate(text) !== true) throw s3Error('MalformedXML');
  let parsed: unknown;
  try {
    parsed = parser.parse(text);
  } catch {
    throw s3Error('MalformedXML');
  }
  if (typeof parsed !== 'object' || parsed === null) throw s3Error('MalformedXML');
  return parsed as XmlNode;
}

/**
 * The deepest element nesting of `text`, counted from its tags without parsing (the parser
 * recurses per level, so depth is checked before it runs).
 */
function depthOf(text: string): number {
  let depth = 0;
  let deepest = 0;
  for (const match of text.matchAll(/<(\/?)[A-Za-z_][^>]*?(\/?)>/g)) {
    if (match[1] === '/') depth -= 1;
    else if (match[2] !== '/') {
      depth += 1;
      if (depth > deepest) deepest = depth;
    }
  }
  return deepest;
}

/** The child elements named `name` of `node` as a list (none, one or several). */
export function xmlList(node: XmlValue | undefined, name: string): readonly XmlValue[] {
  if (node === undefined || typeof node === 'string' || Array.isArray(node)) return [];
  const value = (node as XmlNode)[name];
  if (value === undefined) return [];
  return Array.isArray(value) ? (value as readonly XmlValue[]) : [value];
}

/** The text of child `name` of `node`; undefined when absent, `MalformedXML` when not text. */
export function xmlText(node: XmlValue | undefined, name: string): string | undefined {
  if (node === undefined || typeof node === 'string' || Array.isArray(node)) return undefined;
  const value = (node as XmlNode)[name];
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  // An empty element parses as ''; anything else is a structure where text was expected.
  throw s3Error('MalformedXML', `<${name}> must hold text`);
}
