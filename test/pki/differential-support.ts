/** Re-exports for the differential test (keeps its import list in one place). */
export * from '../../src/pki/index.js';
export { positiveIntegerContent as positiveIntegerContentForTest } from '../../src/pki/der.js';
