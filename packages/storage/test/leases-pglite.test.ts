import { pgliteTarget } from "@trellis/storage/contract";
import { describeLeaseContract } from "../src/lease/leases.contract.js";

describeLeaseContract("pglite", pgliteTarget);
