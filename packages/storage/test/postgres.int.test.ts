import { describeStorageContract, postgresTarget } from "@trellis/storage/contract";

describeStorageContract("postgres", postgresTarget);
