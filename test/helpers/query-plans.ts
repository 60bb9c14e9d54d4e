import { type SQL, sql } from 'drizzle-orm'
import { type SqlExecutor, sqlRows } from '../../src/db/rows'

/** One node of an `explain (analyze, buffers, format json)` plan, with the fields the tests read. */
export interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Actual Rows': number
  'Actual Loops': number
  /** Buffers the node and its children found in (hit) or read into (read) shared buffers. */
  'Shared Hit Blocks'?: number
  'Shared Read Blocks'?: number
  'Index Name'?: string
  'Index Cond'?: string
  Plans?: PlanNode[]
}

/** The top node of an `explain (format json)` row (PGlite returns the JSON as text). */
export function planOf(row: { 'QUERY PLAN': unknown } | undefined): PlanNode {
  const json = row!['QUERY PLAN']
  return ((typeof json === 'string' ? JSON.parse(json) : json) as Array<{ Plan: PlanNode }>)[0]!.Plan
}

/**
 * EXPLAIN ANALYZE of `statement` on the plan made for its values, with the buffers it touched, on
 * the database or a transaction.
 */
export async function explainAnalyze(db: SqlExecutor, statement: SQL): Promise<PlanNode> {
  const [row] = await sqlRows<{ 'QUERY PLAN': unknown }>(
    db,
    sql`explain (analyze, buffers, format json) ${statement}`,
  )
  return planOf(row)
}

/** Pages the whole plan touched (the top node counts its children's). */
export function pagesTouched(plan: PlanNode): number {
  return (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0)
}

/** Every node of a plan that reads `relation` (not the one that writes it). */
export function nodesReading(relation: string, node: PlanNode, found: PlanNode[] = []): PlanNode[] {
  if (node['Relation Name'] === relation && node['Node Type'] !== 'ModifyTable') found.push(node)
  for (const child of node.Plans ?? []) nodesReading(relation, child, found)
  return found
}
