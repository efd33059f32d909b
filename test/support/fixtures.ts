/**
 * Where the in-repo test fixtures are. Tests run from dist/test/..., the data stays in
 * test/fixtures/, so paths are resolved from the repository root.
 */
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (this file compiles to dist/test/support/fixtures.js). */
export const REPO_ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../..');

/** Istio's own test data (see test/fixtures/istio/NOTICE). */
export const ISTIO_FIXTURES = join(REPO_ROOT, 'test/fixtures/istio');
export const INSTALL_CNI_FIXTURES = join(ISTIO_FIXTURES, 'install-cni');
export const CNI_PLUGIN_FIXTURES = join(ISTIO_FIXTURES, 'istio-cni-plugin');
export const ISTIO_IPTABLES_FIXTURES = join(ISTIO_FIXTURES, 'istio-iptables');
