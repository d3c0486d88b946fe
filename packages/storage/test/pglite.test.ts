import { describeStorageContract, pgliteTarget } from "@trellis/storage/contract";

describeStorageContract("pglite", pgliteTarget);
