/** Re-exports for the leaf test. */
export * from '../../src/pki/index.js';
export { SpiffeError, checkX509Svid as checkX509SvidForTest } from '../../src/spiffe/index.js';
