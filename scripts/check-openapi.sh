#!/usr/bin/env bash
# The published OpenAPI document, checked as an integrator would: validated with
# @apidevtools/swagger-parser, linted with @redocly/cli (recommended, redocly.yaml) and Spectral
# (spectral:oas, .spectral.yaml) with 0 errors, and the committed typed client
# (test/client/schema.d.ts) is what openapi-typescript generates from it today.
# `--write` regenerates the client instead of comparing.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
document="$work/openapi.json"
bin=node_modules/.bin

bun scripts/openapi-document.ts >"$document"
bun scripts/validate-openapi.ts "$document"
"$bin/redocly" lint --config redocly.yaml "$document"
"$bin/spectral" lint --ruleset .spectral.yaml --fail-severity error "$document"

generated="$work/schema.d.ts"
# A default is the server's value for a field left out: the field stays optional for the client.
"$bin/openapi-typescript" "$document" --default-non-nullable false --output "$generated" >/dev/null
if [ "${1:-}" = "--write" ]; then
  cp "$generated" test/client/schema.d.ts
  echo "test/client/schema.d.ts regenerated"
elif ! diff -u test/client/schema.d.ts "$generated"; then
  echo "test/client/schema.d.ts is not what the document generates: run scripts/check-openapi.sh --write" >&2
  exit 1
else
  echo "test/client/schema.d.ts matches the document"
fi
