/**
 * Shared habits (issue 11): an idea solved once, in one place. Each probe also finds the one place
 * that is allowed to do the thing, so a probe that stops matching anything fails too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { filesMatching } from './source-files.js';

test('one kubeconfig writer: only src/core/kubeconfig-file.ts spells out a current-context', () => {
  // An object key or a YAML line naming the current context: what a kubeconfig writer writes.
  assert.deepEqual(filesMatching(/['"]current-context['"]\s*:|^\s*['"`]?current-context: /mu), ['core/kubeconfig-file.ts']);
});

test('one protobufjs root per proto set: only src/grpc/proto-load.ts builds or loads a Root', () => {
  const builds = /new protobuf\.Root\(|protobuf\.(?:load|loadSync|parse)\(|Root\.from(?:JSON|Descriptor)\(|\.loadSync\(|from '@grpc\/proto-loader'/u;
  assert.deepEqual(filesMatching(builds), ['grpc/proto-load.ts']);
});

test("no hand-written JWT decoder: tokens are read with jose's decodeJwt / decodeProtectedHeader", () => {
  // Splitting a token on '.' and JSON-parsing a base64url part is a JWT decoder by hand.
  assert.deepEqual(filesMatching(/\.split\('\.'\)/u, /JSON\.parse\(\s*Buffer\.from\([^)]*'base64url'\)/u), []);
  assert.ok(filesMatching(/\bdecodeJwt\(/u).includes('ca/authn/authenticator.ts'));
});
