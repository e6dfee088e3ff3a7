export type { Manifest, ManifestFile } from "./manifest-types.js";
