#!/bin/sh
# Rebuilds the console: TypeScript clients from ../rpc/proto (buf with the
# pinned protoc-gen-es), a type check, the unit tests, then one minified
# bundle in dist/.
# Run through `make console`; the output is the same bytes on every run.
set -eu
cd "$(dirname "$0")"
GO=${GO:-go}
npm ci --no-audit --no-fund --prefer-offline --loglevel=error
$GO tool -modfile=../tools/go.mod buf generate
node_modules/.bin/tsc --noEmit -p .
node_modules/.bin/tsc --noEmit -p tsconfig.test.json
# Unit tests (src/*.test.ts), bundled for node's own test runner.
tests=$(mktemp -d)
trap 'rm -rf "$tests"' EXIT
for t in src/*.test.ts; do
	node_modules/.bin/esbuild "$t" --bundle --platform=node --format=esm --log-level=warning --outfile="$tests/$(basename "$t" .ts).mjs"
done
node --test "$tests"/*.mjs
# Built beside dist/ and swapped in, so a failed build leaves dist/ whole
# (the Go build embeds it).
rm -rf dist.new
mkdir dist.new
node_modules/.bin/esbuild src/main.ts --bundle --minify --format=iife --target=es2022 --charset=utf8 \
	--legal-comments=none --log-level=warning --outfile=dist.new/app.js
node_modules/.bin/esbuild src/app.css --minify --log-level=warning --outfile=dist.new/app.css
cp src/index.html dist.new/index.html
rm -rf dist
mv dist.new dist
