#!/bin/sh
# Rebuilds the console: TypeScript clients from ../rpc/proto (buf with the
# pinned protoc-gen-es), a type check, then one minified bundle in dist/.
# Run through `make console`; the output is the same bytes on every run.
set -eu
cd "$(dirname "$0")"
GO=${GO:-go}
npm ci --no-audit --no-fund --prefer-offline --loglevel=error
$GO tool -modfile=../tools/go.mod buf generate
node_modules/.bin/tsc --noEmit -p .
rm -rf dist
mkdir -p dist
node_modules/.bin/esbuild src/main.ts --bundle --minify --format=iife --target=es2022 --charset=utf8 \
	--legal-comments=none --log-level=warning --outfile=dist/app.js
node_modules/.bin/esbuild src/app.css --minify --log-level=warning --outfile=dist/app.css
cp src/index.html dist/index.html
