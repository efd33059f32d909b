/** The devcluster: a protocol-faithful in-memory Kubernetes API server subset for local runs and tests. */
export { startDevCluster, DEFAULT_ISSUER } from './devcluster.js';
export type { DevCluster, DevClusterOptions } from './devcluster.js';
export type { Faults, FaultMatch } from './faults.js';
export type { RequestLog, LoggedRequest } from './request-log.js';
export { ApiError } from './status.js';
export type { DevclusterErrorCode, StatusBody } from './status.js';
export { RESOURCE_TYPES } from './resources.js';
export type { ResourceType } from './resources.js';
export { parseManifest } from './rest.js';
export { kubeconfigYaml } from './kubeconfig.js';
