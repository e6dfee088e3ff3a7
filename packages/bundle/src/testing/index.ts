// Entry of `@distributor/bundle/testing`: archives made entry by entry, including those no
// well-behaved archiver writes (links out of the tree, device files, odd names), for tests of
// what reads archives (the bundle's extraction, the upload service).
export { type RawEntry, rawTar } from "./raw-tar.js";
