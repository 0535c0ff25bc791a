// The chunk cache's public surface, for the read path and the agent's wiring. How the cache
// works: docs/architecture.md, "The chunk cache".
export {
  ChunkCache,
  type ChunkCacheOptions,
  chunkCacheOptions,
  fetchOutcomeOf,
} from "./chunk_cache.ts";
export type { EvictionReason } from "./policy.ts";
export type {
  CacheStats,
  CacheStatsSnapshot,
  FetchEvent,
  FetchKind,
  FetchOutcome,
} from "./stats.ts";
export {
  CacheFullError,
  CacheTimeoutError,
  type ChunkSource,
  type PositionedChunkSource,
  type RangeReader,
  type RangeReadOptions,
} from "./types.ts";
