/** The repair controller: finds pods that started before the CNI plugin was ready and labels or deletes them. */
export { brokenPodReason, DEFAULT_BROKEN_POD_CRITERIA, type BrokenPodCriteria, type PodFacts, type ContainerStatusFacts } from './broken-pod.js';
export { loadRepairConfig, REPAIR_ENV, type RepairConfig, type RepairFlags, type RepairMode } from './config.js';
export { RepairError, type RepairErrorCode } from './errors.js';
export { startRepairController, EVENT_SOURCE, REASON_DELETE, REASON_LABEL, type RepairControllerOptions, type RepairHandle } from './controller.js';
