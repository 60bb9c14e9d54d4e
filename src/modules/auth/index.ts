import { Elysia, t } from 'elysia'
import { rejectUnknownFields } from '../../lib/strict-body'
import type { AuthPlugin } from '../../plugins/auth'
import { ErrorBody, LoginRequest, MeResponse, RateLimitedBody, SessionResponse, SignupRequest } from './model'
import type { IdentityService } from './service'

/**
 * Sign-up, log-in, log-out and "who am I". Sign-up and log-in are rate-limited per client IP by the
 * global rate-limit plugin (5 and 10 per minute); everything else here needs a credential.
 */
export function authModule(service: IdentityService, authPlugin: AuthPlugin) {
  return new Elysia({ name: 'auth-routes', prefix: '/api/auth' })
    .use(authPlugin)
    .post('/signup', async ({ body, status }) => status(201, await service.signup(body)), {
      body: SignupRequest,
      transform: rejectUnknownFields(SignupRequest),
      response: {
        201: SessionResponse,
        400: ErrorBody,
        403: ErrorBody,
        409: ErrorBody,
        429: RateLimitedBody,
        503: ErrorBody,
      },
      detail: {
        operationId: 'signUp',
        tags: ['Auth'],
        summary: 'Sign up: a new organization, its owner and a session',
        description: [
          'Creates an organization on the default plan (`DEFAULT_PLAN`), its first user with the role `owner`, and a',
          'session. The token is shown once. 403 `signup_disabled` when `SIGNUP_ENABLED=false`; 409 `email_taken`',
          'when the e-mail already has an account. Password rules (NIST SP 800-63B): 8 to 128 characters counted in',
          'Unicode code points (four emoji are four), not only spaces or invisible characters, and not on the',
          'common-password list of `@zxcvbn-ts/language-common` (compared case-insensitively); no composition rules.',
          'A refused password or an `organization_name` that is empty once trimmed is 400 `validation_failed` with',
          '`details[].path` `/password` or `/organization_name`; the name is stored trimmed.',
          'Limited to 5 per minute per client IP.',
        ].join(' '),
      },
    })
    .post('/login', ({ body }) => service.login(body), {
      body: LoginRequest,
      transform: rejectUnknownFields(LoginRequest),
      response: {
        200: SessionResponse,
        400: ErrorBody,
        401: ErrorBody,
        429: RateLimitedBody,
        503: ErrorBody,
      },
      detail: {
        operationId: 'logIn',
        tags: ['Auth'],
        summary: 'Log in: a new session',
        description:
          'Checks the e-mail and password and opens a session (7 days idle, 30 days at most). 401 `invalid_credentials` for an unknown e-mail or a wrong password alike. Limited to 10 per minute per client IP.',
      },
    })
    .post(
      '/logout',
      async ({ principal, status }) => {
        await service.logout(principal)
        return status(204, undefined)
      },
      {
        auth: true,
        response: { 204: t.Void(), 401: ErrorBody, 403: ErrorBody, 429: RateLimitedBody, 503: ErrorBody },
        detail: {
          operationId: 'logOut',
          tags: ['Auth'],
          summary: 'Log out: end the presented session',
          description:
            'Ends the session whose token is presented; later use of it gives 401. With a personal access token: 403 `session_required` (revoke a PAT with `DELETE /api/pat/{token_id}`).',
        },
      },
    )
    .get('/me', ({ principal }) => service.me(principal), {
      auth: true,
      response: { 200: MeResponse, 401: ErrorBody, 429: RateLimitedBody, 503: ErrorBody },
      detail: {
        operationId: 'getCurrentUser',
        tags: ['Auth'],
        summary: 'The caller: user, organization (plan and features), effective permissions',
        description:
          'Works with a session or a PAT. `permissions` are computed for this request: the role, narrowed by the PAT scopes.',
      },
    })
}
