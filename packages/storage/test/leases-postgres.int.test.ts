import { postgresTarget } from "@trellis/storage/contract";
import { describeLeaseContract } from "../src/lease/leases.contract.js";

describeLeaseContract("postgres", postgresTarget);
