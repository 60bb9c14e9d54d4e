import { describe, expect, test } from 'bun:test'
import { dockerfileJscEnv } from '../../bench/support'
import { runToEnd } from '../helpers/process'

// The image tunes JavaScriptCore's collector through the environment (docs/operations.md, "Memory").
// Bun refuses to start when a BUN_JSC_ variable names no option or holds a bad value, so a setting
// misspelt, or dropped by a Bun upgrade, would stop every replica: each is started here.
describe('JavaScriptCore settings of the Dockerfile', () => {
  const settings = dockerfileJscEnv()

  test('the memory budget and the heap growth factor are set', () => {
    expect(Object.keys(settings).sort()).toEqual(['BUN_JSC_forceRAMSize', 'BUN_JSC_smallHeapGrowthFactor'])
    expect(Number(settings.BUN_JSC_smallHeapGrowthFactor)).toBeGreaterThan(1.5)
  })

  const run = (env: Record<string, string>) =>
    runToEnd(['bun', '-e', 'console.log("started")'], {
      cwd: import.meta.dir,
      env: { ...process.env, ...env },
    })

  test('the pinned Bun starts with them', async () => {
    const { code, stdout, stderr } = await run(settings)
    expect({ code, stdout, stderr }).toEqual({ code: 0, stdout: 'started\n', stderr: '' })
  })

  test.each([
    ['a misspelt name', { BUN_JSC_smallHeapGrowthFactr: '1.75' }],
    ['a value that is not a number', { BUN_JSC_smallHeapGrowthFactor: 'fast' }],
  ])('%s stops Bun at start (what the test above guards against)', async (_case, env) => {
    const { code, stderr } = await run(env)
    expect(code).toBe(1)
    expect(stderr).toContain('invalid JSC environment variable')
  })
})
