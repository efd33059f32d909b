/**
 * The standard gRPC health protocol (`grpc.health.v1.Health`, proto/grpc/health/v1/health.proto)
 * every certbroker server speaks: names, the Check path the CA's http2 transport answers itself,
 * the serving status enum (names and wire numbers) and the message shapes.
 */

export const HEALTH_PROTO = 'grpc/health/v1/health.proto';
export const HEALTH_SERVICE = 'grpc.health.v1.Health';
export const HEALTH_CHECK_METHOD = 'Check';
export const HEALTH_CHECK_PATH = `/${HEALTH_SERVICE}/${HEALTH_CHECK_METHOD}`;
export const HEALTH_CHECK_REQUEST_TYPE = 'grpc.health.v1.HealthCheckRequest';
export const HEALTH_CHECK_RESPONSE_TYPE = 'grpc.health.v1.HealthCheckResponse';
/** The service name that stands for the whole server. */
export const WHOLE_SERVER = '';

/** `HealthCheckResponse.ServingStatus` by name, with its wire number. */
export const SERVING_STATUS_NUMBER = Object.freeze({ UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 });
export type ServingStatus = keyof typeof SERVING_STATUS_NUMBER;

export interface HealthCheckRequest {
  readonly service?: string;
}

export interface HealthCheckResponse {
  readonly status: ServingStatus;
}
