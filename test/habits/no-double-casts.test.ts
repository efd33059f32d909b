/**
 * No `as unknown as` in src/ (issue 11): values are typed where they come from (the message types
 * of src/protocol, grpc-js's typed request methods) or narrowed by a check, never forced through
 * `unknown`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { filesMatching, sourceFiles } from './source-files.js';

test('no `as unknown as` cast in src/', () => {
  assert.ok(sourceFiles().length > 100);
  assert.deepEqual(filesMatching(/\bas\s+unknown\s+as\b/u), []);
});
