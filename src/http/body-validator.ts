import { Ajv } from 'ajv';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';

/** JSON bodies are validated by Ajv against the route's TypeBox schema, reporting every problem. */
const ajv = new Ajv({ allErrors: true, strict: false, coerceTypes: false, useDefaults: true });

export const compileBody: FastifySchemaCompiler<FastifySchema> = ({ schema }) => ajv.compile(schema);
