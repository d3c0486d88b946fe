/**
 * Generated contracts of Trellis (from `proto/`, by `npm run generate`).
 *
 * Import an area through its subpath (`@trellis/contracts/core`); this index
 * re-exports the core area for convenience.
 */
export * from "./core.js";
