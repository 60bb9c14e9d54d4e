import { describe, expect, test } from 'bun:test'
import { ConfigError, EnvSchema, loadConfig, SECRET_BEARING_VARIABLES } from '../../src/config'

/** The ConfigError loadConfig throws for `environment` (the test fails when it throws none). */
function refusalOf(environment: Record<string, string>): ConfigError {
  try {
    loadConfig(environment)
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError)
    return error as ConfigError
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(Object.keys(environment))}`)
}

describe('config', () => {
  test('defaults apply when nothing is set', () => {
    const config = loadConfig({})
    expect(config).toMatchObject({
      port: 3000,
      host: '0.0.0.0',
      publicBaseUrl: 'http://localhost:3000',
      publicBasePath: '',
      databaseUrl: undefined,
      redisUrl: undefined,
      dataDir: './.data',
      trustProxy: [],
      logLevel: 'info',
      defaultPlan: 'pro',
      signupEnabled: true,
      logRetentionDays: 30,
      platformRateLimitPerMin: 600_000,
      databasePoolSize: 10,
      databaseLockTimeoutMs: 5_000,
      databaseDriver: 'bun-sql',
    })
  })

  test.each([
    ['0', 0],
    ['250', 250],
    ['600000', 600_000],
  ])('DATABASE_LOCK_TIMEOUT_MS %p: %p ms (0: wait as long as a lock is held)', (value, expected) => {
    expect(loadConfig({ DATABASE_LOCK_TIMEOUT_MS: value }).databaseLockTimeoutMs).toBe(expected)
  })

  test('INGEST_ANSWER_TIMEOUT_MS: 15 s unless set; 100 ms to 10 minutes', () => {
    expect(loadConfig({}).ingestAnswerTimeoutMs).toBe(15_000)
    expect(loadConfig({ INGEST_ANSWER_TIMEOUT_MS: '100' }).ingestAnswerTimeoutMs).toBe(100)
    for (const value of ['0', '99', '600001', '2.5', 'soon'])
      expect(() => loadConfig({ INGEST_ANSWER_TIMEOUT_MS: value })).toThrow(/INGEST_ANSWER_TIMEOUT_MS/)
  })

  test.each(['-1', '600001', '1.5', '5s'])(
    'DATABASE_LOCK_TIMEOUT_MS %p is refused, naming the variable',
    (value) => {
      expect(() => loadConfig({ DATABASE_LOCK_TIMEOUT_MS: value })).toThrow(/DATABASE_LOCK_TIMEOUT_MS/)
    },
  )

  test('a pool of 1 keeps postgres.js unless bun-sql is asked for (which cannot split one connection)', () => {
    expect(loadConfig({ DATABASE_POOL_SIZE: '1' }).databaseDriver).toBe('postgres-js')
    expect(loadConfig({ DATABASE_POOL_SIZE: '2' }).databaseDriver).toBe('bun-sql')
    expect(loadConfig({ DATABASE_POOL_SIZE: '1', DATABASE_DRIVER: 'postgres-js' }).databaseDriver).toBe(
      'postgres-js',
    )
    expect(() => loadConfig({ DATABASE_POOL_SIZE: '1', DATABASE_DRIVER: 'bun-sql' })).toThrow(ConfigError)
  })

  test('values are converted from their text form', () => {
    const config = loadConfig({
      PORT: '8080',
      SIGNUP_ENABLED: 'false',
      TRUST_PROXY: '10.0.0.0/8, ::1',
      PUBLIC_BASE_URL: 'https://leads.example.com/',
      DEFAULT_PLAN: 'free',
    })
    expect(config.port).toBe(8080)
    expect(config.signupEnabled).toBe(false)
    expect(config.trustProxy).toEqual(['10.0.0.0/8', '::1'])
    expect(config.publicBaseUrl).toBe('https://leads.example.com')
    expect(config.defaultPlan).toBe('free')
  })

  test.each([
    ['https://leads.example.com', 'https://leads.example.com', ''],
    ['https://leads.example.com/', 'https://leads.example.com', ''],
    ['https://tools.example.com/crm/leads', 'https://tools.example.com/crm/leads', '/crm/leads'],
    ['https://tools.example.com/crm/leads//', 'https://tools.example.com/crm/leads', '/crm/leads'],
    ['http://10.0.0.5:8080/l%C3%A9ads', 'http://10.0.0.5:8080/l%C3%A9ads', '/l%C3%A9ads'],
  ])('PUBLIC_BASE_URL %p: base %p, path %p', (value, publicBaseUrl, publicBasePath) => {
    const config = loadConfig({ PUBLIC_BASE_URL: value })
    expect({ publicBaseUrl: config.publicBaseUrl, publicBasePath: config.publicBasePath }).toEqual({
      publicBaseUrl,
      publicBasePath,
    })
  })

  test('the default PUBLIC_BASE_URL is the port on localhost, at the root', () => {
    const config = loadConfig({ PORT: '4100' })
    expect({ publicBaseUrl: config.publicBaseUrl, publicBasePath: config.publicBasePath }).toEqual({
      publicBaseUrl: 'http://localhost:4100',
      publicBasePath: '',
    })
  })

  test.each([
    [
      'https://leads.example.com/?source=x',
      'holds a query or a fragment: give the scheme, host and path only',
    ],
    ['https://leads.example.com/crm#top', 'holds a query or a fragment: give the scheme, host and path only'],
    ['https://leads.example.com/crm?', 'holds a query or a fragment: give the scheme, host and path only'],
    [
      'https://admin:hunter2@leads.example.com',
      'holds a user name or password, which every webhook URL would carry',
    ],
    [
      'https://leads.example.com/crm/../leads',
      'its path must be written as a browser sends it ("/leads"): no dot segments, special characters percent-encoded',
    ],
    [
      'https://leads.example.com/léads',
      'its path must be written as a browser sends it ("/l%C3%A9ads"): no dot segments, special characters percent-encoded',
    ],
  ])('PUBLIC_BASE_URL %p is refused: %p, the value never quoted', (value, problem) => {
    const refusal = refusalOf({ PUBLIC_BASE_URL: value })
    expect(refusal.problems).toEqual([`PUBLIC_BASE_URL: ${problem}`])
    expect(refusal.message).not.toContain('hunter2')
  })

  test.each([
    [{}, false],
    [{ INGEST_PIPELINE: 'true' }, true],
    [{ INGEST_PIPELINE: 'false' }, false],
  ])('INGEST_PIPELINE %p: %p (off unless asked for)', (env: Record<string, string>, expected) => {
    expect(loadConfig(env).ingestPipeline).toBe(expected)
  })

  test('INGEST_PIPELINE must be true or false', () => {
    expect(() => loadConfig({ INGEST_PIPELINE: 'yes please' })).toThrow(/INGEST_PIPELINE/)
  })

  test('group-commit statements in flight: one unless more are asked for, never more than the pool', () => {
    const cases: Array<[Record<string, string>, number]> = [
      [{}, 1],
      [{ DATABASE_POOL_SIZE: '4' }, 1],
      [{ INGEST_GROUPS_IN_FLIGHT: '2' }, 2],
      [{ INGEST_GROUPS_IN_FLIGHT: '10' }, 10],
      [{ INGEST_GROUPS_IN_FLIGHT: '30', DATABASE_POOL_SIZE: '8' }, 8],
    ]
    for (const [env, expected] of cases) expect(loadConfig(env).ingestGroupsInFlight).toBe(expected)
    for (const bad of ['0', '1.5', 'two', '201']) {
      expect(() => loadConfig({ INGEST_GROUPS_IN_FLIGHT: bad })).toThrow(ConfigError)
    }
  })

  test('REDIS_KEY_PREFIX: rl: unless set; letters, digits and :._- up to 64 characters', () => {
    expect(loadConfig({}).redisKeyPrefix).toBe('rl:')
    // Empty is unset, as for every variable.
    expect(loadConfig({ REDIS_KEY_PREFIX: '' }).redisKeyPrefix).toBe('rl:')
    for (const prefix of ['staging:rl:', 'tenant-42.', 'a', 'x'.repeat(64)]) {
      expect(loadConfig({ REDIS_KEY_PREFIX: prefix }).redisKeyPrefix).toBe(prefix)
    }
    for (const prefix of ['has space', 'new\nline', 'star*', 'x'.repeat(65), 'brace{}']) {
      expect(() => loadConfig({ REDIS_KEY_PREFIX: prefix })).toThrow(/REDIS_KEY_PREFIX/)
    }
  })

  test('WEBHOOK_SECRETS_PREVIOUS_KEYS: a comma-separated list of keys, each checked', () => {
    const key = (fill: string) => `${fill.repeat(43)}=`
    expect(loadConfig({}).webhookSecretsPreviousKeys).toEqual([])
    expect(
      loadConfig({ WEBHOOK_SECRETS_PREVIOUS_KEYS: ` ${key('A')}, ${key('B')} ,` }).webhookSecretsPreviousKeys,
    ).toEqual([key('A'), key('B')])
    expect(() => loadConfig({ WEBHOOK_SECRETS_PREVIOUS_KEYS: `${key('A')},short` })).toThrow(
      /WEBHOOK_SECRETS_PREVIOUS_KEYS: key 2 is not 32 bytes in base64/,
    )
  })

  test('every bad variable is named, not only the first', () => {
    let caught: unknown
    try {
      loadConfig({
        PORT: 'eighty',
        DATABASE_URL: 'mysql://nope',
        LOG_LEVEL: 'loud',
        DEFAULT_PLAN: 'gold',
        SIGNUP_ENABLED: 'maybe',
        LOG_RETENTION_DAYS: '0',
        TRUST_PROXY: '10.0.0.0/99',
      })
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(ConfigError)
    const problems = (caught as ConfigError).problems
    const named = problems.map((problem) => problem.split(':')[0])
    expect(named.sort()).toEqual(
      [
        'DATABASE_URL',
        'DEFAULT_PLAN',
        'LOG_LEVEL',
        'LOG_RETENTION_DAYS',
        'PORT',
        'SIGNUP_ENABLED',
        'TRUST_PROXY',
      ].sort(),
    )
    expect((caught as ConfigError).message).toContain('PORT')
  })

  describe('a bad value of a variable that may hold a secret is never quoted', () => {
    const MARKER = 'Sup3rS3cretMarker'
    // Invalid for every variable's type or pattern, and a secret wherever it sits: in a URL's
    // password, in a key, in text with no scheme at all.
    const badValues = [
      `mysql://user:${MARKER}@db.internal:3306/leads`,
      `user:${MARKER}@db.internal/leads *`,
      `${MARKER} *`,
      `postgres//user:${MARKER}@db.internal/leads *`,
    ]
    const variables = Object.keys(EnvSchema.properties)

    test('every variable named like a secret is in the list', () => {
      const secretLike = variables.filter((name) => /(_URL|_KEYS?)$|SECRET|PASSWORD|TOKEN/.test(name))
      expect(Object.keys(SECRET_BEARING_VARIABLES).sort()).toEqual(secretLike.sort())
    })

    test.each(Object.keys(SECRET_BEARING_VARIABLES))('%s', (name) => {
      for (const value of badValues) {
        const message = refusalOf({ [name]: value }).message
        expect(message).toContain(`${name}:`)
        expect(message).not.toContain(MARKER)
      }
    })

    test('other variables still quote what they got', () => {
      expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow('(got "loud")')
      expect(() => loadConfig({ DATABASE_URL: 'mysql://db.internal/leads' })).toThrow(
        'DATABASE_URL: Expected string to match',
      )
      expect(() => loadConfig({ DATABASE_URL: 'mysql://db.internal/leads' })).toThrow(
        'a "mysql://" URL, not quoted',
      )
    })

    test('the service stops on such a value without writing it anywhere', async () => {
      const child = Bun.spawn(['bun', 'run', 'src/index.ts'], {
        cwd: `${import.meta.dir}/../..`,
        env: {
          ...process.env,
          DATABASE_URL: badValues[0],
          REDIS_URL: `http://:${MARKER}@cache.internal:6379`,
          WEBHOOK_SECRETS_KEY: MARKER,
        },
        stdout: 'pipe',
        stderr: 'pipe',
      })
      const [exitCode, stdout, stderr] = await Promise.all([
        child.exited,
        new Response(child.stdout).text(),
        new Response(child.stderr).text(),
      ])
      expect(exitCode).toBe(1)
      expect(stderr).toContain('DATABASE_URL')
      expect(stderr).toContain('REDIS_URL')
      expect(stderr).toContain('WEBHOOK_SECRETS_KEY')
      expect(`${stdout}${stderr}`).not.toContain(MARKER)
    })
  })

  test('a value wrapped in quotes is refused for every variable, saying so (docker --env-file keeps them)', () => {
    for (const name of Object.keys(EnvSchema.properties)) {
      for (const quoted of ['"value"', "'value'", ' "postgres://app@db/leads" ']) {
        expect(refusalOf({ [name]: quoted }).problems).toEqual([
          `${name}: the value is wrapped in quotes, which are part of it here (docker --env-file keeps them): remove them`,
        ])
      }
    }
    // Quotes inside a value, or one quote alone, are the value's own.
    expect(loadConfig({ HOST: 'a"b' }).host).toBe('a"b')
    expect(loadConfig({ DATA_DIR: '"./data' }).dataDir).toBe('"./data')
  })

  test('a bad value stops the service with exit code 1 and names the variable', async () => {
    const child = Bun.spawn(['bun', 'run', 'src/index.ts'], {
      cwd: `${import.meta.dir}/../..`,
      env: { ...process.env, PORT: 'not-a-port', REDIS_URL: 'http://wrong', DATABASE_URL: '' },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const exitCode = await child.exited
    const stderr = await new Response(child.stderr).text()
    expect(exitCode).toBe(1)
    expect(stderr).toContain('PORT')
    expect(stderr).toContain('REDIS_URL')
  })
})
