// The Harn conformance flows against distributed Trellis, as `trellis mesh` runs it.
import { describeHarnConformance } from "./suite.js";
import { distributed } from "./targets.js";

describeHarnConformance(distributed);
