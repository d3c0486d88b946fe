// The Harn conformance flows against embedded Trellis, as `npm start` runs it.
import { describeHarnConformance } from "./suite.js";
import { embedded } from "./targets.js";

describeHarnConformance(embedded);
