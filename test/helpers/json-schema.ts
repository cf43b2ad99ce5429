// The served OpenAPI documents' schemas applied to answers: the subset of JSON Schema the
// documents use (type, required, properties, items, enum, $ref into the document). Returns the
// places an answer breaks its schema, so a test's message names them.

type Schema = Record<string, unknown>;

/** The errors of `value` against `schema` (`doc` resolves `#/...` references); [] when valid. */
export function schemaErrors(value: unknown, schema: Schema, doc: Schema, at = '$'): string[] {
  const ref = schema['$ref'];
  if (typeof ref === 'string') return schemaErrors(value, resolve(doc, ref), doc, at);
  const errors: string[] = [];
  const type = schema['type'];
  if (typeof type === 'string' && !hasType(value, type)) return [`${at}: not ${type}`];
  const allowed = schema['enum'];
  if (Array.isArray(allowed) && !allowed.includes(value))
    errors.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(allowed)}`);
  if (type === 'object') {
    const object = value as Record<string, unknown>;
    for (const name of (schema['required'] ?? []) as string[])
      if (!(name in object)) errors.push(`${at}.${name}: required`);
    const properties = (schema['properties'] ?? {}) as Record<string, Schema>;
    for (const [name, sub] of Object.entries(properties))
      if (name in object) errors.push(...schemaErrors(object[name], sub, doc, `${at}.${name}`));
  }
  if (type === 'array' && schema['items'] !== undefined)
    (value as unknown[]).forEach((item, index) =>
      errors.push(...schemaErrors(item, schema['items'] as Schema, doc, `${at}[${index}]`)),
    );
  return errors;
}

function hasType(value: unknown, type: string): boolean {
  if (type === 'array') return Array.isArray(value);
  if (type === 'object')
    return value !== null && typeof value === 'object' && !Array.isArray(value);
  if (type === 'integer') return Number.isInteger(value);
  return typeof value === type;
}

function resolve(doc: Schema, ref: string): Schema {
  let node: unknown = doc;
  for (const part of ref.replace(/^#\//, '').split('/'))
    node = (node as Record<string, unknown>)[part];
  return node as Schema;
}

/** The schema of `method path`'s answer with `status` in the OpenAPI document `doc`. */
export function answerSchema(doc: Schema, method: string, path: string, status: number): Schema {
  const paths = doc['paths'] as Record<string, Record<string, Schema>>;
  const responses = paths[path]?.[method.toLowerCase()]?.['responses'] as Record<string, Schema>;
  const content = responses[String(status)]?.['content'] as Record<string, Schema>;
  return content['application/json']?.['schema'] as Schema;
}
