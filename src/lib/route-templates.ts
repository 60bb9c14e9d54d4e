import type { ValidationDetail } from './errors'
import { isManagementPath } from './http'

/**
 * The route table of the app (`GET /api/webhook/sources/:id/logs`), filled once the app is built
 * (createApp), read by three rules: a rate-limit bucket is named after the endpoint a path reaches,
 * never after the path itself (a Redis key must not embed unbounded client input; a path no route
 * matches counts as `unmatched`); a path asked with a method it does not serve is a 405 with what
 * it allows; a management route's query holds only the parameters it takes, each once.
 */
export class RouteTemplates {
  private byMethod = new Map<string, Array<{ pattern: RegExp; template: string }>>()
  /**
   * `GET /api/v2/leads` → the query parameters it takes, for the management API's routes that take
   * any (filters and paging, where a typo changes the answer); a route that takes none ignores a
   * query, as every route outside the management API does.
   */
  private queryParameters = new Map<string, ReadonlySet<string>>()

  load(routes: ReadonlyArray<RouteInfo>): void {
    const byMethod = new Map<string, Array<{ pattern: RegExp; template: string }>>()
    const queryParameters = new Map<string, ReadonlySet<string>>()
    for (const { method, path, hooks } of routes) {
      const parameters = Object.keys(hooks?.query?.properties ?? {})
      if (parameters.length > 0 && takesOnlyItsQuery(method, path)) {
        queryParameters.set(`${method} ${path}`, new Set(parameters))
      }
      const canonical = path.length > 1 ? path.replace(/\/+$/, '') : path
      const source = canonical
        .split('/')
        .map((segment) =>
          segment.startsWith(':')
            ? '[^/]+'
            : segment === '*'
              ? '.*'
              : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
        )
        .join('/')
      const list = byMethod.get(method) ?? []
      if (!list.some((entry) => entry.template === canonical)) {
        list.push({ pattern: new RegExp(`^${source}$`), template: canonical })
      }
      byMethod.set(method, list)
    }
    this.byMethod = byMethod
    this.queryParameters = queryParameters
  }

  /**
   * What is wrong with a management route's query (`route`: its template, as Elysia names it): a
   * parameter it does not take (a typo was ignored, so a filtered list answered with everything), or
   * one given more than once (read as one of its values, silently). Empty when nothing is, for a
   * route that takes no query, and for every route outside the management API, whose query is free
   * (tracker.js?v=, utm_ on the webhook URL, the dashboard's own forms).
   */
  queryProblems(method: string, route: string, url: string): ValidationDetail[] {
    const known = this.queryParameters.get(`${method} ${route}`)
    const start = url.indexOf('?')
    if (!known || start === -1) return []
    const problems: ValidationDetail[] = []
    const seen = new Set<string>()
    for (const name of new URLSearchParams(url.slice(start + 1)).keys()) {
      if (seen.has(name)) {
        if (known.has(name))
          problems.push({ path: `/${name}`, message: 'given more than once; give it once' })
        continue
      }
      seen.add(name)
      if (!known.has(name)) {
        problems.push({
          path: `/${name}`,
          message: `unknown parameter; expected one of: ${[...known].join(', ')}`,
        })
      }
    }
    return problems
  }

  /**
   * What a path serves, as an Allow header lists it (sorted; HEAD with GET, and OPTIONS), or null
   * when no route has its shape: the errors plugin's 405 for another method (and 204 for OPTIONS).
   * Only asked for a request that matched no route, never on a served one's path.
   */
  allowOf(path: string): string | null {
    const methods = new Set<string>()
    for (const [method, list] of this.byMethod) {
      if (method !== 'ALL' && list.some((entry) => entry.pattern.test(path))) methods.add(method)
    }
    if (methods.size === 0) return null
    if (methods.has('GET')) methods.add('HEAD')
    methods.add('OPTIONS')
    return [...methods].sort().join(', ')
  }

  /** `GET /api/webhook/sources/0190…/logs` → `GET /api/webhook/sources/:id/logs`, else `unmatched`. */
  endpointOf(method: string, path: string): string {
    for (const list of [this.byMethod.get(method), this.byMethod.get('ALL')]) {
      const found = list?.find((entry) => entry.pattern.test(path))
      if (found) return `${method} ${found.template}`
    }
    return 'unmatched'
  }
}

/** What the route table reads of Elysia's `app.routes`. */
export interface RouteInfo {
  method: string
  path: string
  hooks?: { query?: { properties?: Record<string, unknown> } }
}

/** The management API's routes: a query of their schema's parameters only. */
function takesOnlyItsQuery(method: string, path: string): boolean {
  return isManagementPath(path) && method !== 'OPTIONS'
}
