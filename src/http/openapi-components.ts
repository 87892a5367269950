/**
 * The OpenAPI document with its named schemas as components: every schema the routes declare
 * with a `title` (the TypeBox schemas of src/schemas/) becomes `components.schemas[title]`, and
 * each place it was written out a `$ref` to it. @fastify/swagger writes every schema out in full
 * where it is used, so the problem details alone were copied into 227 responses (a document of
 * 435 KB), and client generators named each copy after its operation instead of `User`, `Room`
 * or `Problem`.
 *
 * Only schema positions are walked (request and response bodies, parameters, and inside a schema
 * its properties, items and combinations), so an example that happens to have a `title` stays
 * as written. A place's own `description` (a response's "Created", "Changed") stays beside the
 * `$ref` (OpenAPI 3.1 allows it), the component has none of its own unless every place shares
 * it. Two different schemas with one title keep the second written out.
 */

import { isObject } from '../domain/directory-entities.ts';

type Json = Record<string, unknown>;

/** Members of a schema whose values are schemas, and those whose values are lists or maps of schemas. */
const SCHEMA_MEMBERS = ['items', 'additionalProperties', 'not', 'contains', 'propertyNames', 'if', 'then', 'else', 'unevaluatedItems', 'unevaluatedProperties'];
const SCHEMA_LISTS = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const SCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'dependentSchemas'];

/** A schema without its description: what two places holding the same schema share. */
function withoutDescription(schema: Json): Json {
  const { description: _description, ...shape } = schema;
  return shape;
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`;
  if (isObject(value))
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${stableJson(value[key])}`)
      .join(',')}}`;
  return JSON.stringify(value);
}

export function withNamedSchemas<T extends Json>(document: T): T {
  const named = new Map<string, { shape: string; schema: Json; descriptions: Set<string | undefined> }>();
  const refs: Json[] = [];

  const schema = (node: unknown): unknown => {
    if (!isObject(node)) return node;
    const out: Json = { ...node };
    for (const member of SCHEMA_MEMBERS) if (member in out) out[member] = schema(out[member]);
    for (const member of SCHEMA_LISTS) if (Array.isArray(out[member])) out[member] = (out[member] as unknown[]).map(schema);
    for (const member of SCHEMA_MAPS)
      if (isObject(out[member])) out[member] = Object.fromEntries(Object.entries(out[member]).map(([key, value]) => [key, schema(value)]));
    const title = out['title'];
    if (typeof title !== 'string') return out;
    const shape = stableJson(withoutDescription(out));
    const description = typeof out['description'] === 'string' ? out['description'] : undefined;
    const known = named.get(title);
    if (known === undefined) named.set(title, { shape, schema: out, descriptions: new Set([description]) });
    else if (known.shape !== shape) return out;
    else known.descriptions.add(description);
    const ref: Json = { $ref: `#/components/schemas/${encodeURIComponent(title)}` };
    if (description !== undefined) ref['description'] = description;
    refs.push(ref);
    return ref;
  };

  const content = (node: unknown): unknown =>
    isObject(node)
      ? Object.fromEntries(
          Object.entries(node).map(([type, media]) => [type, isObject(media) && 'schema' in media ? { ...media, schema: schema(media['schema']) } : media]),
        )
      : node;

  const operation = (node: Json): Json => {
    const out: Json = { ...node };
    if (Array.isArray(out['parameters']))
      out['parameters'] = out['parameters'].map((parameter: unknown) =>
        isObject(parameter) && 'schema' in parameter ? { ...parameter, schema: schema(parameter['schema']) } : parameter,
      );
    const withContent = (node: unknown): unknown => (isObject(node) && 'content' in node ? { ...node, content: content(node['content']) } : node);
    if ('requestBody' in out) out['requestBody'] = withContent(out['requestBody']);
    if (isObject(out['responses']))
      out['responses'] = Object.fromEntries(Object.entries(out['responses']).map(([status, response]) => [status, withContent(response)]));
    return out;
  };

  const paths = isObject(document['paths'])
    ? Object.fromEntries(
        Object.entries(document['paths']).map(([path, item]) => [
          path,
          isObject(item)
            ? Object.fromEntries(Object.entries(item).map(([method, op]) => [method, isObject(op) && 'responses' in op ? operation(op) : op]))
            : item,
        ]),
      )
    : document['paths'];

  const schemas: Json = {};
  for (const [title, { schema: component, descriptions }] of [...named].sort(([a], [b]) => a.localeCompare(b))) {
    const shape = withoutDescription(component);
    // The component keeps a description only when every place gives the same one.
    const [only] = descriptions;
    schemas[title] = descriptions.size === 1 && only !== undefined ? { ...shape, description: only } : shape;
  }
  // Where the component already says it, the place need not say it again.
  for (const ref of refs) {
    const title = decodeURIComponent(String(ref['$ref']).slice('#/components/schemas/'.length));
    if (ref['description'] !== undefined && (schemas[title] as Json)['description'] === ref['description']) delete ref['description'];
  }
  const components = isObject(document['components']) ? document['components'] : {};
  return { ...document, paths, components: { ...components, schemas: { ...(isObject(components['schemas']) ? components['schemas'] : {}), ...schemas } } };
}
