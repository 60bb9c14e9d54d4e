import { describe, expect, test } from 'bun:test'
import { createLogger } from '../../src/lib/logger'

function collect(level: 'info' | 'warn' = 'info') {
  const lines: string[] = []
  const logger = createLogger(level, (line) => lines.push(line))
  return { logger, lines }
}

const ENTRY = {
  requestId: '01936f6e-8a1b-7c2d-9e3f-405162738495',
  method: 'POST',
  path: '/api/webhook/lead/flwh_AbCdEfGhIjKlMnOpQrStUvWx',
  status: 200,
  durationMs: 1.25,
  clientIp: '203.0.113.7',
}

describe('the access line', () => {
  test('one JSON line with every field, the path’s key masked, the request id kept as sent', () => {
    const { logger, lines } = collect()
    const before = Date.now()
    logger.access(ENTRY)
    const after = Date.now()
    expect(lines).toHaveLength(1)
    expect(lines[0]!.endsWith('\n')).toBe(true)
    const line = JSON.parse(lines[0]!)
    expect(line).toEqual({
      level: 'info',
      time: expect.any(String),
      msg: 'request',
      request_id: ENTRY.requestId,
      method: 'POST',
      path: '/api/webhook/lead/flwh_AbCd…UvWx',
      status: 200,
      duration_ms: 1.25,
      client_ip: '203.0.113.7',
    })
    const at = Date.parse(line.time)
    expect(new Date(at).toISOString()).toBe(line.time)
    expect(at).toBeGreaterThanOrEqual(before)
    expect(at).toBeLessThanOrEqual(after)
  })

  test('a secret in the request id or the path is masked however it is written', () => {
    const { logger, lines } = collect()
    for (const written of [
      'fl_pat_AbCdEfGhIjKlMnOpQrStUvWx',
      'fl%5Fpat%5FAbCdEfGhIjKlMnOpQrStUvWx',
      'fl\\u005fpat_AbCdEfGhIjKlMnOpQrStUvWx',
    ]) {
      logger.access({ ...ENTRY, requestId: written, path: `/x/${written}` })
    }
    for (const line of lines) {
      expect(line).not.toContain('EfGhIjKlMnOpQrSt')
      expect(line).toContain('AbCd')
    }
  })

  test('the time follows the clock from one millisecond to the next', async () => {
    const { logger, lines } = collect()
    logger.access(ENTRY)
    logger.access(ENTRY)
    await Bun.sleep(5)
    logger.access(ENTRY)
    const [first, second, third] = lines.map((line) => Date.parse(JSON.parse(line).time))
    expect(second! - first!).toBeLessThanOrEqual(1)
    expect(third! - first!).toBeGreaterThanOrEqual(4)
  })

  test('below the info level nothing is written', () => {
    const { logger, lines } = collect('warn')
    logger.access(ENTRY)
    expect(lines).toEqual([])
  })
})
