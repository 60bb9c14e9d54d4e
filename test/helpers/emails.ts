const LETTERS = 'abcdefghijklmnop'

/**
 * A fresh e-mail address whose random part holds no digits. Inbound bodies are scanned for card
 * numbers (13–19 digits, spaces or dashes between them, Luhn-valid) in every field but the phone,
 * and the digit groups of a random UUID form one now and then (`…-4952-9967-44805…`): the address
 * would then be redacted and the lead stored without an e-mail. The UUID's hex digits are written
 * as the letters a–p instead, so the address is as unique and never looks like a card number.
 */
export function uniqueEmail(label = 'lead', domain = 'example.com'): string {
  const random = crypto
    .randomUUID()
    .replaceAll('-', '')
    .replace(/[0-9a-f]/g, (digit) => LETTERS[Number.parseInt(digit, 16)]!)
  return `${label}-${random}@${domain}`
}
