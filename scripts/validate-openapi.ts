import SwaggerParser from '@apidevtools/swagger-parser'

/** `bun scripts/validate-openapi.ts <document.json>`: validates the document against the OpenAPI 3.1 schema and resolves every $ref. */
const file = process.argv[2]
if (!file) throw new Error('usage: bun scripts/validate-openapi.ts <document.json>')
try {
  const api = await SwaggerParser.validate(file)
  console.log(`swagger-parser: ${file} is a valid OpenAPI ${(api as { openapi?: string }).openapi} document`)
} catch (error) {
  console.error(`swagger-parser: ${(error as Error).message}`)
  process.exit(1)
}
