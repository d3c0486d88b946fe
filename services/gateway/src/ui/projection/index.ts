/** The UI event projection: canonical log events → frontend contract envelopes. */
export { formatCursor, parseCursor, type UiCursor } from "./cursor.js";
export {
  envelopeForTier,
  type ProjectedEnvelope,
  UI_EVENT_TIERS,
  UI_EVENT_TYPES,
  UI_EXTENSION_TYPES,
  UI_TIERS,
  UI_TYPES_AWAITING_PRODUCERS,
  UI_TYPES_WITHOUT_EVENTS,
  type UiEventType,
  type UiTier,
} from "./envelopes.js";
export {
  type SessionLineage,
  type ToolOutcomeStatus,
  UiProjector,
  type UiProjectorOptions,
} from "./projector.js";
