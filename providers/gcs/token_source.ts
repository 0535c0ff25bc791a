// The bearer-token contract and sources the GCS store uses (shared with Azure, in
// ../credentials/tokens.ts), and the scope tierd asks Google for.
export * from "../credentials/tokens.ts";

/** The scope tierd asks for: read and write objects. */
export const GCS_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write";
