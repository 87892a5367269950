import type { ParameterError } from '../errors.ts';
import { EMAIL_PATTERN, ID_PATTERN } from '../domain/directory-entities.ts';

/** What each pattern the schemas use asks for, in words a client developer reads without a regex. */
const PATTERN_SENTENCES: ReadonlyMap<string, string> = new Map([
  [ID_PATTERN.source, 'must be 1 to 64 letters, digits, ".", "_" or "-"'],
  [EMAIL_PATTERN.source, 'must be an email address (name@domain, without spaces)'],
  ['^[\\x21-\\x7E]+$', 'must be printable ASCII characters, without spaces'],
]);

/** The sentence for a value that does not match `pattern`. */
export function patternSentence(pattern: string): string {
  return PATTERN_SENTENCES.get(pattern) ?? 'is not in the expected form';
}

/** One error as Ajv reports it (the fields used here). */
export interface ValidationIssue {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string | undefined;
}

function plural(n: unknown, one: string): string {
  return `${String(n)} ${one}${n === 1 ? '' : 's'}`;
}

function typeSentence(type: unknown): string {
  switch (type) {
    case 'string':
      return 'must be a string';
    case 'boolean':
      return 'must be true or false';
    case 'integer':
      return 'must be a whole number';
    case 'number':
      return 'must be a number';
    case 'object':
      return 'must be a JSON object';
    case 'array':
      return 'must be a JSON array';
    case 'null':
      return 'must be null';
    default:
      return `must be of type ${String(type)}`;
  }
}

/** The sentence for one validation issue. */
export function issueSentence(issue: ValidationIssue): string {
  const { params } = issue;
  switch (issue.keyword) {
    case 'required':
      return 'is required';
    case 'additionalProperties':
      return 'is not a field this request takes';
    case 'type':
      return typeSentence(params['type']);
    case 'pattern':
      return patternSentence(String(params['pattern']));
    case 'minLength':
      return params['limit'] === 1 ? 'must not be empty' : `must be at least ${plural(params['limit'], 'character')} long`;
    case 'maxLength':
      return `must be at most ${plural(params['limit'], 'character')} long`;
    case 'minimum':
      return `must be at least ${String(params['limit'])}`;
    case 'maximum':
      return `must be at most ${String(params['limit'])}`;
    case 'enum':
      return `must be one of ${(params['allowedValues'] as unknown[]).map((value) => JSON.stringify(value)).join(', ')}`;
    case 'format':
      return `must be a valid ${String(params['format'])}`;
    case 'minItems':
      return `must hold at least ${plural(params['limit'], 'item')}`;
    case 'maxItems':
      return `must hold at most ${plural(params['limit'], 'item')}`;
    default:
      return issue.message ?? 'is invalid';
  }
}

/**
 * The parameter errors of a 400 from Ajv's issues: one sentence each, named by the field's dotted
 * path. A nullable field (`anyOf` of a type and null) that fails reports why its value (or a member
 * of it) is wrong, not also that it is not null and matches no branch.
 */
export function parameterErrors(issues: readonly ValidationIssue[], fallback: string): ParameterError[] {
  const named = issues.map((issue) => {
    // A missing or unknown member is named by itself, under the path of the object that lacks or has it.
    const member = issue.params['missingProperty'] ?? issue.params['additionalProperty'];
    const at = issue.instancePath.replace(/^\//, '').replaceAll('/', '.');
    const parameter = member !== undefined ? [at, String(member)].filter((part) => part !== '').join('.') : at || fallback;
    return { parameter, issue };
  });
  const isUnionNoise = (issue: ValidationIssue) => issue.keyword === 'anyOf' || (issue.keyword === 'type' && issue.params['type'] === 'null');
  const errors: ParameterError[] = [];
  for (const { parameter, issue } of named) {
    // Dropped when a real issue names the field or one of its members (`settings` beside `settings.foo`).
    const explained = (other: (typeof named)[number]) =>
      !isUnionNoise(other.issue) && (other.parameter === parameter || other.parameter.startsWith(`${parameter}.`));
    if (isUnionNoise(issue) && named.some(explained)) continue;
    const message = issueSentence(issue);
    if (!errors.some((error) => error.parameter === parameter && error.message === message)) errors.push({ parameter, message });
  }
  return errors;
}
