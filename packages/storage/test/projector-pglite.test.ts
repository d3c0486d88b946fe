import { pgliteTarget } from "@trellis/storage/contract";
import { describeProjectorContract } from "../src/journal/projector.contract.js";

describeProjectorContract("pglite", pgliteTarget);
