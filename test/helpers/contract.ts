import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020'
import addFormats from 'ajv-formats'

/**
 * Conformance of every response the tests receive to the published OpenAPI document: the status is
 * one the operation documents, every header it declares `required` is present, an empty response
 * is empty, and a JSON body validates against the documented schema of that status (ajv, JSON
 * Schema 2020-12 as OpenAPI 3.1 uses). Response objects are checked closed (a field the document
 * does not name fails) unless the document says `additionalProperties` itself (error bodies carry
 * fields of their own). makeTestApp wires this into `app.handle`, so every integration test is
 * also a contract test, and the document cannot drift from the server.
 */
export interface ContractDocument {
  paths: Record<string, Record<string, Operation>>
  components?: Record<string, unknown>
}

interface Operation {
  responses?: Record<
    string,
    { headers?: Record<string, { $ref?: string; required?: boolean }>; content?: Record<string, unknown> }
  >
}

interface Route {
  template: string
  pattern: RegExp
  parameters: number
}

export class ContractViolation extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ContractViolation'
  }
}

const METHODS = new Set(['get', 'put', 'post', 'delete', 'patch', 'head'])

export class Contract {
  private readonly ajv: Ajv2020
  private readonly routes: Route[]
  private readonly validators = new Map<string, ValidateFunction>()

  constructor(private readonly document: ContractDocument) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true })
    addFormats(this.ajv)
    this.ajv.addSchema(closeObjects(structuredClone(document)) as object, 'openapi')
    this.routes = Object.keys(document.paths)
      .map((template) => ({
        template,
        pattern: new RegExp(`^${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`),
        parameters: (template.match(/\{/g) ?? []).length,
      }))
      // A literal path wins over a template that also matches it.
      .sort((left, right) => left.parameters - right.parameters)
  }

  /** Throws a ContractViolation when the response breaks the document; routes it does not describe are left alone. */
  async check(request: Request, response: Response): Promise<void> {
    const method = request.method.toLowerCase()
    if (!METHODS.has(method)) return
    const path = new URL(request.url).pathname.replace(/(.)\/+$/, '$1')
    const route = this.routes.find((candidate) => candidate.pattern.test(path))
    const operation = route && this.document.paths[route.template]?.[method]
    if (!route || !operation) return
    const where = `${request.method} ${route.template} → ${response.status}`
    const documented = operation.responses?.[String(response.status)]
    if (!documented) {
      throw new ContractViolation(
        `${where}: status not documented (documented: ${Object.keys(operation.responses ?? {}).join(', ')})`,
      )
    }
    for (const [name, header] of Object.entries(documented.headers ?? {})) {
      const required = header.$ref ? this.resolveHeader(header.$ref).required : header.required
      if (required && !response.headers.has(name))
        throw new ContractViolation(`${where}: header ${name} missing`)
    }
    // The response itself is handed over, and copied only where its body is read: a copy (a tee)
    // of a streamed CSV export would make the stream read ahead of the test's own reader.
    if (!documented.content) {
      const text = await response.clone().text()
      if (text !== '')
        throw new ContractViolation(`${where}: documented without a body, got ${text.slice(0, 200)}`)
      return
    }
    const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim()
    if (!(type in documented.content)) {
      throw new ContractViolation(
        `${where}: content type ${type || '(none)'} not documented (${Object.keys(documented.content).join(', ')})`,
      )
    }
    // Only JSON bodies are read: a CSV export streams as the client reads.
    if (type !== 'application/json') return
    const text = await response.clone().text()
    const validate = this.validator(route.template, method, String(response.status))
    const body = JSON.parse(text)
    if (!validate(body)) {
      throw new ContractViolation(
        `${where}: body does not match the documented schema: ${this.ajv.errorsText(validate.errors)}\n${text.slice(0, 500)}`,
      )
    }
  }

  private validator(template: string, method: string, status: string): ValidateFunction {
    const key = `${method} ${template} ${status}`
    let validate = this.validators.get(key)
    if (!validate) {
      const pointer = [
        'paths',
        template,
        method,
        'responses',
        status,
        'content',
        'application/json',
        'schema',
      ]
        .map((segment) => encodeURIComponent(segment.replaceAll('~', '~0').replaceAll('/', '~1')))
        .join('/')
      validate = this.ajv.compile({ $ref: `openapi#/${pointer}` })
      this.validators.set(key, validate)
    }
    return validate
  }

  private resolveHeader(reference: string): { required?: boolean } {
    const name = reference.split('/').pop()!
    const headers = (this.document.components?.headers ?? {}) as Record<string, { required?: boolean }>
    return headers[name] ?? {}
  }
}

/** Every object schema that does not say otherwise is closed, so an undocumented field fails. */
function closeObjects(node: unknown, key = ''): unknown {
  // Examples and defaults are data, not schemas.
  if (key === 'examples' || key === 'example' || key === 'default') return node
  if (Array.isArray(node)) return node.map((child) => closeObjects(child))
  if (!node || typeof node !== 'object') return node
  const object = node as Record<string, unknown>
  for (const [name, value] of Object.entries(object)) object[name] = closeObjects(value, name)
  if (
    object.type === 'object' &&
    object.properties &&
    !('additionalProperties' in object) &&
    !('patternProperties' in object)
  ) {
    object.additionalProperties = false
  }
  return object
}

let shared: Promise<Contract> | undefined

/** The contract of the app's document, built once per test process (the document does not vary). */
export function contractOf(fetchDocument: () => Promise<Response>): Promise<Contract> {
  shared ??= fetchDocument().then(
    async (response) => new Contract((await response.json()) as ContractDocument),
  )
  return shared
}
