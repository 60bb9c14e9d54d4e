// Every second: per database matching PREFIX, cumulative CPU ticks of its service processes
// (DATABASE_URL in their environment) and of its PostgreSQL backends, and leads inserted
// (pg_stat_user_tables.n_tup_ins). Appends one JSON line per sample to OUT.
import { appendFileSync, readFileSync, readdirSync } from 'node:fs'
import postgres from 'postgres'
const PREFIX = process.env.PREFIX!
const OUT = process.env.OUT!
const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres', { max: 1, onnotice: () => {} })
const perDb = new Map<string, ReturnType<typeof postgres>>()
const seen = new Map<string, { db: string; kind: string; ticks: number }>()
const dead: Record<string, { service: number; postgres: number }> = {}
const ticks = (pid: string) => { try { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' '); return Number(f[11]) + Number(f[12]) } catch { return null } }
let stop = false
process.on('SIGTERM', () => { stop = true })
while (!stop) {
  const alive = new Set<string>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    let env: string
    try { env = readFileSync(`/proc/${name}/environ`, 'utf8') } catch { continue }
    const m = env.match(/DATABASE_URL=postgres:\/\/[^\0]*\/([^\0/?]+)/)
    if (!m || !m[1]!.startsWith(PREFIX)) continue
    const t = ticks(name); if (t === null) continue
    seen.set(`s:${name}`, { db: m[1]!, kind: 'service', ticks: t }); alive.add(`s:${name}`)
  }
  const rows = await admin<{ pid: number; datname: string }[]>`select pid, datname from pg_stat_activity where datname like ${PREFIX + '%'}`
  for (const { pid, datname } of rows) {
    const t = ticks(String(pid)); if (t === null) continue
    seen.set(`p:${pid}`, { db: datname, kind: 'postgres', ticks: t }); alive.add(`p:${pid}`)
  }
  const totals: Record<string, { service: number; postgres: number; leads?: number }> = {}
  for (const [key, v] of seen) {
    if (!alive.has(key)) { dead[v.db] ??= { service: 0, postgres: 0 }; (dead[v.db] as any)[v.kind] += v.ticks; seen.delete(key); continue }
    totals[v.db] ??= { service: 0, postgres: 0 }; (totals[v.db] as any)[v.kind] += v.ticks
  }
  for (const [db, d] of Object.entries(dead)) { totals[db] ??= { service: 0, postgres: 0 }; totals[db].service += d.service; totals[db].postgres += d.postgres }
  for (const db of Object.keys(totals)) {
    if (!perDb.has(db)) perDb.set(db, postgres(`postgres://postgres@127.0.0.1:5432/${db}`, { max: 1, onnotice: () => {} }))
    try { const [r] = await perDb.get(db)!<{ n: string }[]>`select n_tup_ins::text as n from pg_stat_user_tables where relname = 'leads'`; totals[db].leads = Number(r?.n ?? 0) } catch {}
  }
  appendFileSync(OUT, JSON.stringify({ t: Date.now(), load: readFileSync('/proc/loadavg', 'utf8').split(' ')[0], totals }) + '\n')
  await Bun.sleep(1000)
}
await admin.end(); for (const c of perDb.values()) await c.end()
