import { packageProject } from "../../vitest.shared.ts";

// The store's suites run against a real PostgreSQL that the global setup starts on loopback.
export default packageProject("store-postgres", { globalSetup: ["test/global-setup.ts"] });
