import { pgliteTarget } from "@trellis/storage/contract";
import { describeJournalUnitContract } from "../src/journal/journal-unit.contract.js";

describeJournalUnitContract("pglite", pgliteTarget);
