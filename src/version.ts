// The tierd version, recorded in object metadata and printed by `tierd --version`.
export const VERSION = "0.1.0";
