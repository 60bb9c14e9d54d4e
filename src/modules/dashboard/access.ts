import type { AuthRequirement } from '../../plugins/auth'
import { LOG_ACCESS } from '../delivery-logs'
import { LEAD_ACCESS } from '../leads'
import { MEMBER_ACCESS } from '../members'
import { PAT_ACCESS } from '../pat'
import { SOURCE_ACCESS } from '../sources'

/**
 * What each page needs: the API route's own requirement, imported from its module, never
 * restated. A page that shows what several routes return needs the least of them and shows the
 * rest only to whom the other routes allow (a free plan sees its sources without their health).
 */
export const PAGE_ACCESS = {
  sources: SOURCE_ACCESS.read,
  createSource: SOURCE_ACCESS.manage,
  updateSource: SOURCE_ACCESS.manage,
  regenerateKey: SOURCE_ACCESS.endKeys,
  deleteSource: SOURCE_ACCESS.endKeys,
  health: LOG_ACCESS,
  logs: LOG_ACCESS,
  leads: LEAD_ACCESS.read,
  editLead: LEAD_ACCESS.write,
  deleteLead: LEAD_ACCESS.delete,
  tokens: PAT_ACCESS.own,
  createToken: PAT_ACCESS.create,
  members: MEMBER_ACCESS,
} satisfies Record<string, AuthRequirement | true>

export const NAVIGATION: Array<{ href: string; label: string; requires: AuthRequirement | true }> = [
  { href: '/app/sources', label: 'Sources', requires: PAGE_ACCESS.sources },
  { href: '/app/leads', label: 'Leads', requires: PAGE_ACCESS.leads },
  { href: '/app/tokens', label: 'Access tokens', requires: PAGE_ACCESS.tokens },
  { href: '/app/members', label: 'Members', requires: PAGE_ACCESS.members },
]
