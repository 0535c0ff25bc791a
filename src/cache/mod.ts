// The chunk cache's public surface, for the read path and the agent's wiring (DESIGN §7).
export { ChunkCache, type ChunkCacheOptions, chunkCacheOptions } from "./chunk_cache.ts";
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
