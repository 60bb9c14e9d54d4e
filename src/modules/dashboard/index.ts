import { Elysia } from 'elysia'
import type { AppContext } from '../../context'
import { AppError } from '../../lib/errors'
import { cookieValue } from '../../lib/http'
import { allows } from '../../plugins/auth'
import type { CredentialResolver, Principal } from '../auth/credentials'
import { csvFileName } from '../leads'
import { PAGE_ACCESS } from './access'
import { type Asset, loadAssets } from './assets'
import {
  AddMemberForm,
  AssetParams,
  CreateSourceForm,
  CreateTokenForm,
  CsrfForm,
  HtmlPage,
  hidden,
  IdParams,
  LeadForm,
  LeadsPageQuery,
  LogParams,
  LogsPageQuery,
  MemberParams,
  pageResponses,
  Redirect,
  RegenerateForm,
  RoleForm,
  SignInForm,
  SignInQuery,
  SignUpForm,
  SourceForm,
  SourcesPageQuery,
  TokenParams,
} from './model'
import type { DashboardService } from './service'
import {
  browserPath,
  clearedSessionCookie,
  csrfProblem,
  DASHBOARD_PATH,
  dashboardSessionPlugin,
  newPreSessionCsrfValue,
  type PageSession,
  PRE_SESSION_CSRF_COOKIE,
  preSessionCsrfCookie,
  SIGN_IN_PATH,
  safeNext,
  sessionCookie,
} from './session'
import { signInPage, signUpPage } from './views/auth'
import { confirmPage } from './views/confirm'
import { renderErrorPage } from './views/layout'
import { leadPage } from './views/lead'
import { leadsPage } from './views/leads'
import { logEntryPage, logsPage } from './views/logs'
import { membersPage } from './views/members'
import { sourcePage } from './views/source'
import { sourcesPage } from './views/sources'
import { type TokensView, tokensPage } from './views/tokens'

/**
 * Every page: no caching of personal data, no framing (clickjacking), scripts and styles from this
 * service only (htmx and uPlot are served from /app/assets), no referrer beyond the origin.
 */
const PAGE_HEADERS: Record<string, string> = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
}

/** Where a signed-in user lands: the first page their role and plan allow. */
function homeOf(principal: Principal): string {
  return allows(principal, PAGE_ACCESS.sources) ? '/app/sources' : '/app/leads'
}

/** Elysia's `set`: the status and headers of the response being built. */
interface Reply {
  status?: number | string
  headers: Record<string, string | number | string[] | undefined>
}

/**
 * A handler's AppError (a 404 for another organization's source, a 400 from a form, a 409) as an
 * HTML page with its status; anything else goes to the app's error handler (500 / 503).
 */
async function htmlOrErrorPage(
  set: Reply,
  session: PageSession,
  build: () => Promise<string> | string,
): Promise<string> {
  try {
    return await build()
  } catch (error) {
    if (error instanceof AppError && error.status >= 400 && error.status < 500) {
      set.status = error.status
      return renderErrorPage(error.status, messageOf(error), { session })
    }
    throw error
  }
}

/** The message of a refusal, with the fields a validation error names. */
function messageOf(error: AppError): string {
  const details = (error.extra.details ?? []) as Array<{ path: string; message: string }>
  return details.length
    ? `${error.message}: ${details.map((detail) => `${detail.path} ${detail.message}`).join('; ')}`
    : error.message
}

/** Runs a form action; an AppError the user can fix comes back as the message to show. */
async function attempt<T>(set: Reply, action: () => Promise<T>): Promise<{ value?: T; error?: AppError }> {
  try {
    return { value: await action() }
  } catch (error) {
    if (error instanceof AppError && error.status >= 400 && error.status < 500) {
      set.status = error.status
      return { error }
    }
    throw error
  }
}

/**
 * The dashboard: server-rendered pages under /app on the services the API routes call, signed in
 * with a session cookie (session.ts). Kept out of the OpenAPI document: it is not an API.
 */
export function dashboardModule(
  ctx: AppContext,
  { service, resolver }: { service: DashboardService; resolver: CredentialResolver },
) {
  const { config } = ctx
  const basePath = config.publicBasePath

  /** 303 to a dashboard path (`/app/…`), under PUBLIC_BASE_URL's path as the browser must ask for it. */
  function redirect(set: Reply, path: string): string {
    set.status = 303
    set.headers.location = browserPath(config, path)
    return ''
  }
  // Read from disk on the first asset request, then served from memory.
  let assets: Promise<Map<string, Asset>> | undefined
  const loadedAssets = () => {
    assets ??= loadAssets()
    return assets
  }

  /** The tokens page with the caller's live tokens; `mayCreate` follows the create permission. */
  async function renderTokensPage(
    session: TokensView['session'],
    notices: Pick<TokensView, 'created' | 'error' | 'revoked'> = {},
  ): Promise<string> {
    return tokensPage({
      session,
      tokens: (await service.tokens(session.principal)).data,
      mayCreate: allows(session.principal, PAGE_ACCESS.createToken),
      ...notices,
    })
  }

  /** The members page with the live list; `done` or `error` says what the last action did. */
  async function renderMembersPage(
    session: PageSession,
    notices: { done?: string | null; error?: AppError } = {},
  ): Promise<string> {
    return membersPage({
      session,
      members: (await service.members(session.principal)).data,
      done: notices.done,
      error: notices.error && messageOf(notices.error),
    })
  }

  function preSessionCsrf(request: Request, set: Reply): string {
    const existing = cookieValue(request, PRE_SESSION_CSRF_COOKIE)
    if (existing) return existing
    const value = newPreSessionCsrfValue()
    set.headers['set-cookie'] = preSessionCsrfCookie(config, value)
    return value
  }

  const pages = new Elysia({ name: 'dashboard', prefix: DASHBOARD_PATH })
    .onTransform(({ set }) => {
      Object.assign(set.headers, PAGE_HEADERS)
    })
    .use(dashboardSessionPlugin(ctx, resolver))
    .get(
      '/assets/:file',
      async ({ params, request, set, status }) => {
        const asset: Asset | undefined = (await loadedAssets()).get(params.file)
        if (!asset) return status(404, renderErrorPage(404, 'no such file', { basePath }))
        const headers = {
          ...(set.headers as Record<string, string>),
          'content-type': asset.type,
          etag: asset.etag,
          'cache-control': 'public, max-age=3600',
        }
        if (request.headers.get('if-none-match') === asset.etag) {
          return new Response(null, { status: 304, headers }) as unknown as string
        }
        return new Response(asset.body, { headers }) as unknown as string
      },
      { params: AssetParams, response: { 200: HtmlPage, 304: Redirect, 404: HtmlPage }, detail: hidden },
    )
    .get(
      '/sign-in',
      async ({ request, query, set }) => {
        const authentication = await resolver.authenticateSessionCookie(request)
        if (authentication.ok) return redirect(set, homeOf(authentication.principal))
        return signInPage({ basePath, csrfToken: preSessionCsrf(request, set), next: safeNext(query.next) })
      },
      { query: SignInQuery, response: pageResponses, detail: hidden },
    )
    .post(
      '/sign-in',
      async ({ request, body, set }) => {
        const expected = cookieValue(request, PRE_SESSION_CSRF_COOKIE)
        const problem = csrfProblem(config, request, body, expected)
        if (problem) {
          set.status = 403
          return renderErrorPage(403, problem, { basePath })
        }
        const result = await attempt(set, () => service.signIn(body.email, body.password))
        if (!result.value) {
          return signInPage({
            basePath,
            csrfToken: expected!,
            next: safeNext(body.next),
            email: body.email,
            error: messageOf(result.error!),
          })
        }
        set.headers['set-cookie'] = sessionCookie(config, result.value.token)
        return redirect(set, safeNext(body.next))
      },
      { body: SignInForm, response: { ...pageResponses, 401: HtmlPage }, detail: hidden },
    )
    .get(
      '/sign-up',
      ({ request, set }) =>
        signUpPage({
          basePath,
          csrfToken: preSessionCsrf(request, set),
          signupEnabled: config.signupEnabled,
        }),
      { response: pageResponses, detail: hidden },
    )
    .post(
      '/sign-up',
      async ({ request, body, set }) => {
        const expected = cookieValue(request, PRE_SESSION_CSRF_COOKIE)
        const problem = csrfProblem(config, request, body, expected)
        if (problem) {
          set.status = 403
          return renderErrorPage(403, problem, { basePath })
        }
        const result = await attempt(set, () =>
          service.signUp({
            email: body.email,
            password: body.password,
            organization_name: body.organization_name,
          }),
        )
        if (!result.value) {
          return signUpPage({
            basePath,
            csrfToken: expected!,
            email: body.email,
            organizationName: body.organization_name,
            error: messageOf(result.error!),
            signupEnabled: config.signupEnabled,
          })
        }
        set.headers['set-cookie'] = sessionCookie(config, result.value.token)
        return redirect(set, DASHBOARD_PATH)
      },
      { body: SignUpForm, response: pageResponses, detail: hidden },
    )
    .post(
      '/sign-out',
      async ({ principal, set }) => {
        await service.signOut(principal)
        set.headers['set-cookie'] = clearedSessionCookie(config)
        return redirect(set, SIGN_IN_PATH)
      },
      { page: true, body: CsrfForm, response: pageResponses, detail: hidden },
    )
    .get('', ({ principal, set }) => redirect(set, homeOf(principal)), {
      page: true,
      response: pageResponses,
      detail: hidden,
    })
    .get(
      '/sources',
      ({ session, query, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const { summaries, nextCursor } = await service.sources(session.principal, query.cursor)
          return sourcesPage({
            session,
            summaries,
            nextCursor,
            mayCreate: allows(session.principal, PAGE_ACCESS.createSource),
            deleted: query.deleted === '1',
          })
        }),
      { page: PAGE_ACCESS.sources, query: SourcesPageQuery, response: pageResponses, detail: hidden },
    )
    .post(
      '/sources',
      ({ session, body, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const created = await service.createSource(session.principal, body.name)
          const { source, health } = await service.source(session.principal, created.id)
          set.status = 201
          return sourcePage({
            ...sourceViewBase(session, config.publicBaseUrl),
            source,
            health,
            newKey: created,
            newKeyHeadline: 'Source created',
          })
        }),
      {
        page: PAGE_ACCESS.createSource,
        body: CreateSourceForm,
        response: { ...pageResponses, 201: HtmlPage },
        detail: hidden,
      },
    )
    .get(
      '/sources/:id',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const { source, health } = await service.source(session.principal, params.id)
          return sourcePage({ ...sourceViewBase(session, config.publicBaseUrl), source, health })
        }),
      { page: PAGE_ACCESS.sources, params: IdParams, response: pageResponses, detail: hidden },
    )
    .post(
      '/sources/:id',
      ({ session, params, body, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const result = await attempt(set, () => service.updateSource(session.principal, params.id, body))
          // A 404 (another organization's source) is a page of its own, not a form error.
          if (result.error?.status === 404) throw result.error
          const { source, health } = await service.source(session.principal, params.id)
          return sourcePage({
            ...sourceViewBase(session, config.publicBaseUrl),
            source,
            health,
            saved: Boolean(result.value),
            error: result.error?.message,
            details: result.error?.extra.details as SourceDetails,
          })
        }),
      {
        page: PAGE_ACCESS.updateSource,
        params: IdParams,
        body: SourceForm,
        response: pageResponses,
        detail: hidden,
      },
    )
    .post(
      '/sources/:id/regenerate-key',
      ({ session, params, body, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const rotated = await service.regenerateKey(session.principal, params.id, body.grace_seconds)
          const { source, health } = await service.source(session.principal, params.id)
          return sourcePage({
            ...sourceViewBase(session, config.publicBaseUrl),
            source,
            health,
            newKey: rotated,
            newKeyHeadline: 'Key regenerated',
          })
        }),
      {
        page: PAGE_ACCESS.regenerateKey,
        params: IdParams,
        body: RegenerateForm,
        response: pageResponses,
        detail: hidden,
      },
    )
    .get(
      '/sources/:id/delete',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const { source } = await service.source(session.principal, params.id)
          return confirmPage({
            session,
            title: `Delete ${source.name}?`,
            consequences:
              'Its webhook URL stops answering at once and its delivery logs are deleted. The leads it collected stay.',
            action: `/app/sources/${source.id}/delete`,
            button: 'Delete source',
            cancelHref: `/app/sources/${source.id}`,
            current: '/app/sources',
          })
        }),
      { page: PAGE_ACCESS.deleteSource, params: IdParams, response: pageResponses, detail: hidden },
    )
    .post(
      '/sources/:id/delete',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          await service.deleteSource(session.principal, params.id)
          return redirect(set, '/app/sources?deleted=1')
        }),
      {
        page: PAGE_ACCESS.deleteSource,
        params: IdParams,
        body: CsrfForm,
        response: pageResponses,
        detail: hidden,
      },
    )
    .get(
      '/sources/:id/logs',
      ({ session, params, query, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const { source, page } = await service.logs(session.principal, params.id, query)
          return logsPage({ session, source, page, query })
        }),
      {
        page: PAGE_ACCESS.logs,
        params: IdParams,
        query: LogsPageQuery,
        response: pageResponses,
        detail: hidden,
      },
    )
    .get(
      '/sources/:id/logs/:log_id',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const { source, entry } = await service.logEntry(session.principal, params.id, params.log_id)
          return logEntryPage({ session, source, entry })
        }),
      { page: PAGE_ACCESS.logs, params: LogParams, response: pageResponses, detail: hidden },
    )
    .get(
      '/leads',
      ({ session, query, set }) =>
        htmlOrErrorPage(set, session, async () =>
          leadsPage({ session, list: await service.leads(session.principal, query), query }),
        ),
      { page: PAGE_ACCESS.leads, query: LeadsPageQuery, response: pageResponses, detail: hidden },
    )
    .get(
      '/leads/export.csv',
      ({ session, query, set }) =>
        htmlOrErrorPage(set, session, () => {
          const stream = service.exportLeads(session.principal, query)
          return new Response(stream, {
            headers: {
              ...(set.headers as Record<string, string>),
              'content-type': 'text/csv; charset=utf-8',
              'content-disposition': `attachment; filename="${csvFileName(ctx.clock.now())}"`,
            },
          }) as unknown as string
        }),
      { page: PAGE_ACCESS.leads, query: LeadsPageQuery, response: pageResponses, detail: hidden },
    )
    .get(
      '/leads/:id',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () =>
          leadPage({ ...leadViewBase(session), lead: await service.lead(session.principal, params.id) }),
        ),
      { page: PAGE_ACCESS.leads, params: IdParams, response: pageResponses, detail: hidden },
    )
    .post(
      '/leads/:id',
      ({ session, params, body, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const result = await attempt(set, () => service.updateLead(session.principal, params.id, body))
          // A 404 (another organization's lead) is a page of its own, not a form error.
          if (result.error?.status === 404) throw result.error
          return leadPage({
            ...leadViewBase(session),
            lead: result.value ?? (await service.lead(session.principal, params.id)),
            saved: Boolean(result.value),
            error: result.error?.message,
            details: result.error?.extra.details as SourceDetails,
          })
        }),
      {
        page: PAGE_ACCESS.editLead,
        params: IdParams,
        body: LeadForm,
        response: pageResponses,
        detail: hidden,
      },
    )
    .get(
      '/leads/:id/delete',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const lead = await service.lead(session.principal, params.id)
          return confirmPage({
            session,
            title: `Delete the lead ${lead.email ?? lead.phone_raw ?? lead.lead_id}?`,
            consequences:
              'The lead and its fields are deleted for good; delivery-log entries keep its id for the record.',
            action: `/app/leads/${lead.lead_id}/delete`,
            button: 'Delete lead',
            cancelHref: `/app/leads/${lead.lead_id}`,
            current: '/app/leads',
          })
        }),
      { page: PAGE_ACCESS.deleteLead, params: IdParams, response: pageResponses, detail: hidden },
    )
    .post(
      '/leads/:id/delete',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          await service.deleteLead(session.principal, params.id)
          return redirect(set, '/app/leads?deleted=1')
        }),
      {
        page: PAGE_ACCESS.deleteLead,
        params: IdParams,
        body: CsrfForm,
        response: pageResponses,
        detail: hidden,
      },
    )
    .get(
      '/tokens',
      ({ session, set }) => htmlOrErrorPage(set, session, async () => renderTokensPage(session)),
      { page: PAGE_ACCESS.tokens, response: pageResponses, detail: hidden },
    )
    .post(
      '/tokens',
      ({ session, body, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const result = await attempt(set, () => service.createToken(session.principal, body))
          if (result.value) set.status = 201
          return renderTokensPage(session, {
            created: result.value && { token: result.value.token, name: result.value.name },
            error: result.error && messageOf(result.error),
          })
        }),
      {
        page: PAGE_ACCESS.createToken,
        body: CreateTokenForm,
        response: { ...pageResponses, 201: HtmlPage },
        detail: hidden,
      },
    )
    .post(
      '/tokens/:token_id/revoke',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          await service.revokeToken(session.principal, params.token_id)
          return renderTokensPage(session, { revoked: true })
        }),
      {
        page: PAGE_ACCESS.tokens,
        params: TokenParams,
        body: CsrfForm,
        response: pageResponses,
        detail: hidden,
      },
    )
    .get('/members', ({ session, set }) => htmlOrErrorPage(set, session, () => renderMembersPage(session)), {
      page: PAGE_ACCESS.members,
      response: pageResponses,
      detail: hidden,
    })
    .post(
      '/members',
      ({ session, body, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const result = await attempt(set, () => service.addMember(session.principal, body))
          if (result.value) set.status = 201
          return renderMembersPage(session, {
            done: result.value && `${result.value.email} added.`,
            error: result.error,
          })
        }),
      {
        page: PAGE_ACCESS.members,
        body: AddMemberForm,
        response: { ...pageResponses, 201: HtmlPage },
        detail: hidden,
      },
    )
    .post(
      '/members/:user_id/role',
      ({ session, params, body, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const result = await attempt(set, () =>
            service.changeMemberRole(session.principal, params.user_id, body.role),
          )
          if (result.error?.status === 404) throw result.error
          return renderMembersPage(session, {
            done: result.value && `${result.value.email} is now ${result.value.role}.`,
            error: result.error,
          })
        }),
      {
        page: PAGE_ACCESS.members,
        params: MemberParams,
        body: RoleForm,
        response: pageResponses,
        detail: hidden,
      },
    )
    .get(
      '/members/:user_id/remove',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const member = await service.member(session.principal, params.user_id)
          return confirmPage({
            session,
            title: `Remove ${member.email}?`,
            consequences: `${member.email} can no longer sign in; their sessions and access tokens stop at once.`,
            action: `/app/members/${member.user_id}/remove`,
            button: 'Remove member',
            cancelHref: '/app/members',
            current: '/app/members',
          })
        }),
      { page: PAGE_ACCESS.members, params: MemberParams, response: pageResponses, detail: hidden },
    )
    .post(
      '/members/:user_id/remove',
      ({ session, params, set }) =>
        htmlOrErrorPage(set, session, async () => {
          const result = await attempt(set, () => service.removeMember(session.principal, params.user_id))
          if (result.error?.status === 404) throw result.error
          return renderMembersPage(session, {
            done: result.value && `${result.value.email} removed.`,
            error: result.error,
          })
        }),
      {
        page: PAGE_ACCESS.members,
        params: MemberParams,
        body: CsrfForm,
        response: pageResponses,
        detail: hidden,
      },
    )

  // A first visit to the service lands on the dashboard, not on a JSON 404.
  return new Elysia({ name: 'dashboard-root' })
    .get('/', ({ set }) => redirect(set, DASHBOARD_PATH), {
      response: { 303: Redirect },
      detail: hidden,
    })
    .use(pages)
}

type SourceDetails = Array<{ path: string; message: string }> | undefined

function sourceViewBase(session: PageSession, publicBaseUrl: string) {
  return {
    session,
    publicBaseUrl,
    mayManage: allows(session.principal, PAGE_ACCESS.updateSource),
    mayRegenerate: allows(session.principal, PAGE_ACCESS.regenerateKey),
    mayDelete: allows(session.principal, PAGE_ACCESS.deleteSource),
  }
}

function leadViewBase(session: PageSession) {
  return {
    session,
    mayEdit: allows(session.principal, PAGE_ACCESS.editLead),
    mayDelete: allows(session.principal, PAGE_ACCESS.deleteLead),
  }
}
