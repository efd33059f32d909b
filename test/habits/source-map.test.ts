/**
 * docs/source-map.md stays true: every file of src/ and bench/ opens with a doc comment, and the
 * map generated from those comments (scripts/source-map.mjs) is the one committed. A file added,
 * moved, removed or re-described without `node scripts/source-map.mjs` fails here.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from '../support/fixtures.js';

interface SourceMapModule {
  renderSourceMap(root?: string): { text: string; missing: string[] };
  firstSentence(comment: string): string;
  leadingDocComment(text: string): string | undefined;
}

const load = async (): Promise<SourceMapModule> => (await import(pathToFileURL(join(REPO_ROOT, 'scripts', 'source-map.mjs')).href)) as SourceMapModule;
/** The map as the files give it now, rendered once for the two tests that read it. */
let rendered: Promise<{ text: string; missing: string[] }> | undefined;
const current = () => (rendered ??= load().then((m) => m.renderSourceMap(REPO_ROOT)));

test('every file of src/ and bench/ opens with a doc comment', async () => {
  const { missing } = await current();
  assert.deepEqual(missing, []);
});

test('docs/source-map.md is the map the files give now (run `node scripts/source-map.mjs` after adding, moving or re-describing one)', async () => {
  const { text } = await current();
  assert.equal(readFileSync(join(REPO_ROOT, 'docs', 'source-map.md'), 'utf8'), text);
});

test('the summary is the comment\'s first sentence: a shebang is skipped, "e.g." does not end it, a second paragraph is not read', async () => {
  const m = await load();
  const comment = m.leadingDocComment('#!/usr/bin/env node\n/**\n * The parser, e.g. for\n * tokens. More here.\n *\n * Second.\n */\nexport {};\n');
  assert.equal(comment !== undefined && m.firstSentence(comment), 'The parser, e.g. for tokens.');
  assert.equal(m.leadingDocComment('import x from "y";\n/** Late. */\n'), undefined);
  assert.equal(m.firstSentence('No full stop at all'), 'No full stop at all');
});
