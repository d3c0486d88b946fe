/**
 * @trellis/runtime: what every Trellis service is built with — the server
 * (`createService`), health, reflection, tracing, error mapping, logs, config,
 * shutdown and service-to-service clients.
 */

export type { ClientsOf, ServiceProtocol, ServiceTransportOptions } from "./client.js";
export { createClients, createServiceClient, createServiceTransport } from "./client.js";
export type {
  ConfigField,
  ConfigOf,
  ConfigSchema,
  DurationOptions,
  IntOptions,
  UrlOptions,
} from "./config.js";
export { env, loadConfig, parseDurationMs } from "./config.js";
export {
  CONNECT_RETRY_BUDGET_MS,
  createConnectRetryInterceptor,
  isConnectionRefused,
} from "./connect-retry.js";
export { createErrorInterceptor, toWireError } from "./error-interceptor.js";
export type { CoreReason, TrellisErrorOptions } from "./errors.js";
export {
  codeForReason,
  errorDetailOf,
  errors,
  isTrellisError,
  TrellisError,
  toConnectError,
} from "./errors.js";
export { generatedKeyFile, memoryKey } from "./generated-key.js";
export type {
  DependencyStatus,
  HealthDependency,
  HealthOptions,
  HealthReporter,
  ServingStatus,
} from "./health.js";
export { IdleBackoff, type IdleBackoffOptions } from "./idle-backoff.js";
export {
  type CanonicalJsonOptions,
  canonicalJson,
  hasLoneSurrogate,
  isJsonObject,
  isRecord,
} from "./json.js";
export { scanJsonStructure } from "./json-scan.js";
export type { RequestLimits } from "./limits.js";
export {
  defaultRequestLimits,
  jsonDepthFor,
  requestLimitsFromEnv,
  requestLimitsSchema,
} from "./limits.js";
export type { LogFields, Logger, LoggerOptions, LogLevel } from "./logger.js";
export { createLogger, isSecretKey, parseLogLevel } from "./logger.js";
export { isValidMediaType, MAX_MEDIA_TYPE_LENGTH } from "./media-type.js";
export type {
  MetricExporterKind,
  Metrics,
  MetricsInterceptorOptions,
  MetricsOptions,
} from "./metrics.js";
export {
  createServerMetricsInterceptor,
  initMetrics,
  metricExporterFromEnv,
  rpcServerDurationMetric,
} from "./metrics.js";
export type { ProtocolErrorContext } from "./protocol-errors.js";
export { inputRejectedByDatabase, reasonForCode, typedRpcError } from "./protocol-errors.js";
export {
  defaultFieldCaps,
  type FieldCaps,
  fieldCapsFromEnv,
  fieldCapsSchema,
  meshVerifiedKey,
} from "./request-checks.js";
export {
  acceptOrCreateRequestId,
  peerAddressKey,
  requestIdFromContext,
  requestIdHeader,
  requestIdKey,
  requestIdOf,
} from "./request-id.js";
export type { SecretBoxOptions } from "./secret-box.js";
export { SecretBox } from "./secret-box.js";
export {
  isSecretFingerprint,
  MIN_FINGERPRINT_KEY_BYTES,
  SECRET_FINGERPRINT_PATTERN,
  type SecretFingerprint,
  SecretFingerprints,
} from "./secret-fingerprint.js";
export type {
  CloseOptions,
  Closer,
  HttpHandler,
  HttpRequest,
  HttpResponse,
  ListenOptions,
  ServiceAddress,
  ServiceOptions,
  TrellisService,
  UpgradeHandler,
} from "./server.js";
export { createService, httpRequestId } from "./server.js";
export { withErrorDetails } from "./service-errors.js";
export type { ShutdownSignalsOptions } from "./signals.js";
export { onShutdownSignals } from "./signals.js";
export { sleep } from "./sleep.js";
export type { FieldLimits, StructureLimits, StructureViolation } from "./structure-limits.js";
export {
  checkJsonStructure,
  defaultStructureLimits,
  findStructureViolation,
  structureError,
  structureLimitsFromEnv,
  structureLimitsSchema,
} from "./structure-limits.js";
export type {
  HeaderRecord,
  Telemetry,
  TelemetryOptions,
  TraceCarrier,
  TraceExporterKind,
  TracingInterceptorOptions,
  WithSpanOptions,
} from "./telemetry.js";
export {
  createClientTracingInterceptor,
  createServerTracingInterceptor,
  extractTraceContext,
  initTelemetry,
  injectTraceHeaders,
  withSpan,
} from "./telemetry.js";
export {
  type WaitForDependencyOptions,
  waitForDependency,
} from "./wait-for-dependency.js";
