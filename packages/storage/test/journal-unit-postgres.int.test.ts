import { postgresTarget } from "@trellis/storage/contract";
import { describeJournalUnitContract } from "../src/journal/journal-unit.contract.js";

describeJournalUnitContract("postgres", postgresTarget);
