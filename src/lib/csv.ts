/**
 * CSV as RFC 4180 writes it, made safe to open in a spreadsheet.
 *
 * - A cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage return, which some
 *   spreadsheets skip before reading a formula) is prefixed with `'` so it is read as text, never
 *   as a formula (OWASP "CSV Injection"). Lead fields come from anonymous web forms, so a name of
 *   `=HYPERLINK(...)` must stay a name. An E.164 phone (`+4420…`) is prefixed too: the rule is
 *   about the first character, not about what the text means.
 * - A cell containing a comma, a double quote, CR or LF is quoted, its quotes doubled.
 * - Rows end with CRLF.
 */
const FORMULA_TRIGGERS = new Set(['=', '+', '-', '@', '\t', '\r'])
const NEEDS_QUOTES = /[",\r\n]/

export function csvCell(value: string | null | undefined): string {
  if (value === null || value === undefined || value === '') return ''
  const text = FORMULA_TRIGGERS.has(value[0]!) ? `'${value}` : value
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

export function csvRow(cells: ReadonlyArray<string | null | undefined>): string {
  return cells.map(csvCell).join(',') + '\r\n'
}
