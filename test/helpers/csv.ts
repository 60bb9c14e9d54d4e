/**
 * An RFC 4180 reader for tests: quoted cells (doubled quotes, commas and line breaks inside),
 * CRLF row ends. Strict: a stray quote or a row without its CRLF fails the test that reads it.
 */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let cell = ''
  let index = 0
  while (index < text.length) {
    const character = text[index]!
    if (character === '"' && cell === '') {
      let end = index + 1
      for (;;) {
        const quote = text.indexOf('"', end)
        if (quote < 0) throw new Error(`unterminated quoted cell at ${index}`)
        if (text[quote + 1] === '"') {
          cell += text.slice(end, quote + 1)
          end = quote + 2
          continue
        }
        cell += text.slice(end, quote)
        index = quote + 1
        break
      }
      if (index < text.length && text[index] !== ',' && text[index] !== '\r') {
        throw new Error(`text after a quoted cell at ${index}`)
      }
      continue
    }
    if (character === ',') {
      row.push(cell)
      cell = ''
      index++
    } else if (character === '\r') {
      if (text[index + 1] !== '\n') throw new Error(`CR without LF at ${index}`)
      row.push(cell)
      rows.push(row)
      row = []
      cell = ''
      index += 2
    } else if (character === '"' || character === '\n') {
      throw new Error(`unexpected ${JSON.stringify(character)} in an unquoted cell at ${index}`)
    } else {
      cell += character
      index++
    }
  }
  if (cell !== '' || row.length > 0) throw new Error('the last row does not end with CRLF')
  return rows
}

/** Rows as objects keyed by the header row. */
export function csvRecords(text: string): Array<Record<string, string>> {
  const [header, ...rows] = parseCsv(text)
  if (!header) throw new Error('no header row')
  return rows.map((row) => {
    if (row.length !== header.length)
      throw new Error(`a row has ${row.length} cells, the header ${header.length}`)
    return Object.fromEntries(header.map((name, column) => [name, row[column]!]))
  })
}
