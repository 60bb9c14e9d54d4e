import { ValueErrorType } from '@sinclair/typebox/errors'
import { Value } from '@sinclair/typebox/value'
import type { ValidationDetail } from './errors'

/** One failed check as Elysia reports it (a TypeBox value error). */
export interface ValidationIssue {
  path?: string
  type?: number
  message?: string
  summary?: string
  schema?: unknown
  value?: unknown
}

type JsonSchema = {
  type?: string | string[]
  format?: string
  const?: unknown
  enum?: unknown[]
  anyOf?: JsonSchema[]
  minimum?: number
  maximum?: number
  minLength?: number
  maxLength?: number
  minItems?: number
  maxItems?: number
  pattern?: string
}

const MAX_DETAILS = 20
const TEXT_FORMS = new Set(['integer', 'numeric', 'boolean'])

/**
 * The one place validation failures are worded for clients: each detail names the parameter or
 * field as a JSON pointer (`/limit`) and says what is expected in the API's terms (allowed values,
 * integer ranges, lengths), never TypeBox or Elysia internals (`Expected kind 'UnionEnum'`,
 * "should be one of: 'integer', 'integer'").
 *
 * Elysia checks a query integer inside its string-to-integer transform, where the parameter name is
 * lost (the path is empty): the name is recovered from the request's own query string, as the
 * parameter whose text is that number and fails that schema.
 */
export function describeValidationIssues(issues: ValidationIssue[], request: Request): ValidationDetail[] {
  return issues.slice(0, MAX_DETAILS).map((issue) => ({
    path: issue.path || unnamedParameterPath(issue, request),
    message: describeIssue(issue),
  }))
}

function describeIssue(issue: ValidationIssue): string {
  if (issue.type === ValueErrorType.ObjectRequiredProperty) return 'is required'
  if (issue.type === ValueErrorType.ObjectAdditionalProperties) return 'is not a known field'
  const expectation = describeSchema(issue.schema as JsonSchema | undefined)
  return expectation ? `must be ${expectation}` : 'is not valid'
}

/** What a schema accepts, in words: "one of: a, b", "an integer from 1 to 200", "a UUID". */
export function describeSchema(schema: JsonSchema | undefined): string | undefined {
  if (!schema || typeof schema !== 'object') return undefined
  const allowed = allowedValues(schema)
  if (allowed) return `one of: ${allowed.join(', ')}`
  if (schema.anyOf) {
    const nullable = schema.anyOf.some((member) => member.type === 'null')
    // Elysia's query coercions pair a value with its text form (`format: integer|numeric|boolean`):
    // the text form is how it travels, not another accepted type.
    const members = schema.anyOf.filter(
      (member) =>
        member.type !== 'null' && !(member.type === 'string' && TEXT_FORMS.has(member.format ?? '')),
    )
    const described =
      members.length === 1
        ? describeSchema({ ...schema, ...members[0], anyOf: undefined })
        : members
            .map((member) => describeSchema(member))
            .filter(Boolean)
            .join(' or ')
    if (!described) return undefined
    return nullable ? `${described} or null` : described
  }
  switch (schema.type) {
    case 'integer':
    case 'number':
      return `${schema.type === 'integer' ? 'an integer' : 'a number'}${range(schema.minimum, schema.maximum, '')}`
    case 'string':
      if (schema.format === 'uuid') return 'a UUID'
      if (schema.format === 'date-time') return 'a date-time (RFC 3339, e.g. 2026-01-01T00:00:00Z)'
      if (schema.format === 'email') return 'an e-mail address'
      return `a string${range(schema.minLength, schema.maxLength, ' characters')}${
        schema.pattern ? ' in the documented format' : ''
      }`
    case 'boolean':
      return 'true or false'
    case 'array':
      return `an array${range(schema.minItems, schema.maxItems, ' items')}`
    case 'object':
      return 'an object'
    case 'null':
      return 'null'
    default:
      return undefined
  }
}

function allowedValues(schema: JsonSchema): string[] | undefined {
  if (Array.isArray(schema.enum)) return schema.enum.map(String)
  if (schema.const !== undefined) return [String(schema.const)]
  if (
    Array.isArray(schema.anyOf) &&
    schema.anyOf.length > 0 &&
    schema.anyOf.every((member) => 'const' in member)
  ) {
    return schema.anyOf.map((member) => String(member.const))
  }
  return undefined
}

function range(minimum: number | undefined, maximum: number | undefined, unit: string): string {
  if (minimum !== undefined && maximum !== undefined) return ` from ${minimum} to ${maximum}${unit}`
  if (minimum !== undefined) return ` of at least ${minimum}${unit}`
  if (maximum !== undefined) return ` of at most ${maximum}${unit}`
  return ''
}

function unnamedParameterPath(issue: ValidationIssue, request: Request): string {
  const names: string[] = []
  for (const [name, text] of new URL(request.url).searchParams) {
    const parsed = Number(text)
    if (text.trim() !== '' && parsed === issue.value && !Value.Check(issue.schema as never, parsed)) {
      if (!names.includes(name)) names.push(name)
    }
  }
  return names.length === 1 ? `/${names[0]!.replaceAll('~', '~0').replaceAll('/', '~1')}` : '/'
}
