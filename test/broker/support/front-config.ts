/** The Istio CA front's settings for tests: listening on 127.0.0.1, an ephemeral port, the defaults otherwise (with `overrides`). */
import { ISTIO_CA_FRONT_DEFAULTS, type IstioCaFrontConfig } from '../../../src/broker/index.js';

export function frontConfig(overrides: Partial<IstioCaFrontConfig> = {}): IstioCaFrontConfig {
  const d = ISTIO_CA_FRONT_DEFAULTS;
  return {
    host: '127.0.0.1',
    port: 0,
    servingNames: d.servingNames,
    allowedAccounts: d.allowedAccounts,
    audiences: d.audiences,
    tokenCacheSeconds: d.tokenCacheSeconds,
    ratePerSecond: d.ratePerSecond,
    burst: d.burst,
    maxInFlight: d.maxInFlight,
    ...overrides,
  };
}
