import { postgresTarget } from "@trellis/storage/contract";
import { describeProjectorContract } from "../src/journal/projector.contract.js";

describeProjectorContract("postgres", postgresTarget);
