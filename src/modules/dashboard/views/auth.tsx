import { CsrfField, documentOf, Layout, Notice } from './layout'

export interface SignInForm {
  /** config.publicBasePath: the start of every URL of the page. */
  basePath: string
  csrfToken: string
  next: string
  email?: string
  error?: string | null
}

export function signInPage(form: SignInForm): string {
  return documentOf(
    <Layout title="Sign in" basePath={form.basePath}>
      <h1>Sign in</h1>
      <Notice kind="error" message={form.error} />
      <form method="post" action={`${form.basePath}/app/sign-in`} class="stack narrow">
        <CsrfField token={form.csrfToken} />
        <input type="hidden" name="next" value={form.next} />
        <label for="email">E-mail</label>
        <input id="email" name="email" type="email" autocomplete="username" required value={form.email} />
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required />
        <button type="submit">Sign in</button>
      </form>
      <p>
        New here? <a href={`${form.basePath}/app/sign-up`}>Create an account</a>
      </p>
    </Layout>,
  )
}

export interface SignUpForm {
  /** config.publicBasePath: the start of every URL of the page. */
  basePath: string
  csrfToken: string
  email?: string
  organizationName?: string
  error?: string | null
  signupEnabled: boolean
}

export function signUpPage(form: SignUpForm): string {
  return documentOf(
    <Layout title="Create an account" basePath={form.basePath}>
      <h1>Create an account</h1>
      <Notice kind="error" message={form.error} />
      {form.signupEnabled ? (
        <form method="post" action={`${form.basePath}/app/sign-up`} class="stack narrow">
          <CsrfField token={form.csrfToken} />
          <label for="organization_name">Organization name</label>
          <input
            id="organization_name"
            name="organization_name"
            required
            maxlength="200"
            autocomplete="organization"
            value={form.organizationName}
          />
          <label for="email">E-mail</label>
          <input id="email" name="email" type="email" autocomplete="username" required value={form.email} />
          <label for="password">Password</label>
          <input
            id="password"
            name="password"
            type="password"
            autocomplete="new-password"
            minlength="8"
            required
            aria-describedby="password-rules"
          />
          <p id="password-rules" class="hint">
            8 to 128 characters; not a common password.
          </p>
          <button type="submit">Create account</button>
        </form>
      ) : (
        <p>Sign-up is disabled on this service; ask an administrator for an account.</p>
      )}
      <p>
        Already have an account? <a href={`${form.basePath}/app/sign-in`}>Sign in</a>
      </p>
    </Layout>,
  )
}
