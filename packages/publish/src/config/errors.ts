// ConfigError lives in @distributor/storage, below the adapters that validate their options
// with it too; the publish package re-exports it unchanged.
export { ConfigError, type ConfigErrorOptions, isConfigError } from "@distributor/storage";
