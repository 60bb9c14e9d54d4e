import { isCardFieldName } from '../../src/lib/card-data'

/**
 * A random secret from `make` that does not read as a card-data field name. A few in a hundred do
 * (`cc` or `cvv` as a token somewhere in 40 random characters), and a field with such a name is
 * dropped as card data instead of being kept with the secret masked: which rule wins would depend
 * on chance. That case has its own test (secrets-at-rest.test.ts).
 */
export function secretNotCardNamed(make: () => string): string {
  for (;;) {
    const secret = make()
    if (!isCardFieldName(secret)) return secret
  }
}
