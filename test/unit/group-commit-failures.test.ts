import { describe, expect, test } from 'bun:test'
import { isDatabaseUnavailable } from '../../src/lib/errors'
import type { GroupCommitWriter } from '../../src/modules/inbound/group-commit'
import type { InboundRepository, IngestItem, IngestRow } from '../../src/modules/inbound/repository'
import { createdRows, groupCommitWriter, leadWithEmail, requestFacts } from '../helpers/inbound'

/**
 * What the group commit does when its statement fails, by the class of the failure: a group the
 * database rolled back for another transaction's sake (a deadlock between two groups updating leads
 * in crossing order, a serialization failure) or for one item it refused is written again lead by
 * lead, so only a lead that fails alone fails; a database that cannot serve fails the whole group at
 * once (writing each lead again would only wait longer for the same answer). A lone lead's deadlock
 * is answered 503 (sent again, it succeeds), not 500.
 */
function databaseError(code: string, message: string) {
  return Object.assign(new Error(message), { code })
}

const CASES: Array<{
  label: string
  error: () => Error
  /** Whether a group of several is written again lead by lead. */
  split: boolean
}> = [
  { label: 'a deadlock (40P01)', error: () => databaseError('40P01', 'deadlock detected'), split: true },
  {
    label: 'a serialization failure (40001)',
    error: () => databaseError('40001', 'could not serialize access due to concurrent update'),
    split: true,
  },
  {
    label: 'an item the database refused (23505)',
    error: () => databaseError('23505', 'duplicate key value violates unique constraint'),
    split: true,
  },
  {
    label: 'a connection lost (08006)',
    error: () => databaseError('08006', 'connection failure'),
    split: false,
  },
  {
    label: 'a statement timeout (57014)',
    error: () => databaseError('57014', 'canceling statement due to statement timeout'),
    split: false,
  },
]

/** A repository that fails every statement of more than one item with `groupError`, and writes lone items. */
function failingGroups(groupError: () => Error, loneError?: () => Error) {
  const calls: number[] = []
  const repository = {
    async ingestLeads(items: readonly IngestItem[]): Promise<IngestRow[]> {
      calls.push(items.length)
      if (items.length > 1) throw groupError()
      if (loneError) throw loneError()
      return createdRows(items)
    },
  }
  return { repository: repository as unknown as InboundRepository, calls }
}

/** Four leads queued in one turn: one group of four. */
function queueFour(writer: GroupCommitWriter) {
  return Array.from({ length: 4 }, (_, index) =>
    writer
      .ingest({ id: 's', organizationId: 'o' }, leadWithEmail(`lead-${index}@example.com`), requestFacts())
      .then(
        (result) => ({ outcome: result.outcome as string }),
        (error: unknown) => ({ failed: (error as Error).message, unavailable: isDatabaseUnavailable(error) }),
      ),
  )
}

describe('group commit: a failed group, by the class of its failure', () => {
  for (const { label, error, split } of CASES) {
    test(`${label}: ${split ? 'written again lead by lead, every lead stored' : 'the whole group fails at once'}`, async () => {
      const failing = failingGroups(error)
      const answers = await Promise.all(queueFour(groupCommitWriter({}, failing.repository)))
      if (split) {
        expect(failing.calls).toEqual([4, 1, 1, 1, 1])
        expect(answers).toEqual(Array(4).fill({ outcome: 'created' }))
      } else {
        expect(failing.calls).toEqual([4])
        const failed = { failed: error().message, unavailable: true }
        expect(answers).toEqual(Array(4).fill(failed))
      }
    })
  }

  test('a lone lead that deadlocks again is answered as "cannot serve now" (503), never stored twice', async () => {
    const deadlock = () => databaseError('40P01', 'deadlock detected')
    const failing = failingGroups(deadlock, deadlock)
    const answers = await Promise.all(queueFour(groupCommitWriter({}, failing.repository)))
    expect(failing.calls).toEqual([4, 1, 1, 1, 1])
    expect(answers).toEqual(Array(4).fill({ failed: 'deadlock detected', unavailable: true }))
  })
})
