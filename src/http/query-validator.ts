import type { FastifySchema, FastifySchemaCompiler } from 'fastify';
import { ProblemError, type ParameterError } from '../errors.ts';
import { patternSentence } from './validation-messages.ts';

/**
 * Validates query strings and path parameters against the route's own TypeBox
 * schema, so the OpenAPI document and the validation cannot drift. Unlike a
 * generic JSON-Schema validator it parses text as the contract says: strict
 * int32 integers, `true`/`false` and enum values in any letter case (unless marked exact), a value
 * given twice is an error, and every bad parameter is reported, not just the first.
 */

interface PropertySchema {
  type?: string;
  pattern?: string;
  maxLength?: number;
  enum?: readonly string[];
  /** The enum's values in their own letter case only (see schemas/string-enum.ts). */
  'x-exact-case'?: boolean;
  minimum?: number;
  maximum?: number;
  default?: unknown;
}

interface ObjectSchema {
  properties?: Record<string, PropertySchema>;
  required?: readonly string[];
}

const INT32_MIN = -2_147_483_648;
const INT32_MAX = 2_147_483_647;
const INTEGER_TEXT = /^[+-]?\d+$/;

type Parsed = { ok: true; value: unknown } | { ok: false; message: string };

function parseValue(text: string, schema: PropertySchema): Parsed {
  switch (schema.type) {
    case 'integer': {
      if (!INTEGER_TEXT.test(text)) return { ok: false, message: `must be an integer, got "${preview(text)}"` };
      const n = Number(text);
      if (n < INT32_MIN || n > INT32_MAX) return { ok: false, message: 'must be a 32-bit integer' };
      if (schema.minimum !== undefined && n < schema.minimum) {
        return { ok: false, message: `must be at least ${schema.minimum}, got ${n}` };
      }
      return { ok: true, value: n === 0 ? 0 : n };
    }
    case 'boolean': {
      const lower = text.toLowerCase();
      if (lower === 'true') return { ok: true, value: true };
      if (lower === 'false') return { ok: true, value: false };
      return { ok: false, message: `must be true or false, got "${preview(text)}"` };
    }
    default: {
      if (schema.maxLength !== undefined && text.length > schema.maxLength) {
        return { ok: false, message: `must be at most ${schema.maxLength} characters` };
      }
      if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(text)) {
        return { ok: false, message: patternSentence(schema.pattern) };
      }
      if (schema.enum === undefined) return { ok: true, value: text };
      const exact = schema['x-exact-case'] === true;
      const match = schema.enum.find((allowed) => (exact ? allowed === text : allowed.toLowerCase() === text.toLowerCase()));
      if (match !== undefined) return { ok: true, value: match };
      return { ok: false, message: `must be one of ${schema.enum.join(', ')}${exact ? '' : ' (any letter case)'}, got "${preview(text)}"` };
    }
  }
}

function preview(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

/** Compiles a validator for a query-string, header or path-parameter object schema. */
export const compileTextParameters: FastifySchemaCompiler<FastifySchema> = (route) => {
  const schema = route.schema as ObjectSchema;
  const properties = Object.entries(schema.properties ?? {});
  const required = new Set(schema.required ?? []);
  return (data: unknown) => {
    const input = (data ?? {}) as Record<string, unknown>;
    // Undeclared entries (other headers, unknown query parameters) pass through untouched.
    const value: Record<string, unknown> = Object.assign(Object.create(null), input);
    const errors: ParameterError[] = [];
    for (const [name, property] of properties) {
      const raw = Object.hasOwn(input, name) ? input[name] : undefined;
      if (raw === undefined) {
        if (required.has(name)) errors.push({ parameter: name, message: 'is required' });
        else if (property.default !== undefined) value[name] = property.default;
        else delete value[name];
        continue;
      }
      if (typeof raw !== 'string') {
        errors.push({ parameter: name, message: 'must be given at most once' });
        continue;
      }
      const parsed = parseValue(raw, property);
      if (parsed.ok) value[name] = parsed.value;
      else errors.push({ parameter: name, message: parsed.message });
    }
    if (errors.length > 0) {
      const detail = errors.map((e) => `${e.parameter} ${e.message}`).join('; ');
      return { error: new ProblemError('invalid-parameter', detail, { errors }) };
    }
    return { value };
  };
};
