/** Turning a schema mismatch into the field and the words an operator can act on. */
import type { TSchema } from '@sinclair/typebox';
import type { TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType } from '@sinclair/typebox/errors';

/** Words for what a schema accepts. */
function describeSchema(schema: TSchema): string {
  if (Array.isArray(schema.anyOf))
    return (schema.anyOf as TSchema[]).map(describeSchema).join(' or ');
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  switch (schema.type) {
    case 'integer':
      return typeof schema.minimum === 'number' ? `an integer >= ${schema.minimum}` : 'an integer';
    case 'number':
      return typeof schema.minimum === 'number' ? `a number >= ${schema.minimum}` : 'a number';
    case 'string':
      if (typeof schema.pattern === 'string') return `a string matching ${schema.pattern}`;
      return schema.minLength === 1 ? 'a non-empty string' : 'a string';
    case 'boolean':
      return 'true or false';
    case 'null':
      return 'null';
    case 'array':
      return 'an array';
    case 'object':
      return 'an object';
    default:
      return 'a valid value';
  }
}

/** A value shown briefly in an error message. */
export function showValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** The first field that does not match, as a dotted path, and what is wrong with it. */
export function explainMismatch(
  check: TypeCheck<TSchema>,
  value: unknown,
): { field: string | undefined; problem: string } {
  const error = check.Errors(value).First();
  if (!error) return { field: undefined, problem: 'does not match its schema' };
  const field = error.path.replace(/^\//, '').replaceAll('/', '.') || undefined;
  const missing =
    error.type === ValueErrorType.ObjectRequiredProperty ||
    (error.value === undefined && field !== undefined);
  const problem = missing
    ? 'is required but missing'
    : `expected ${describeSchema(error.schema)}, got ${showValue(error.value)}`;
  return { field, problem };
}
