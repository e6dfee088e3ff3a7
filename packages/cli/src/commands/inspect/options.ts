/** What `distributor inspect` hands its handler once its flags are checked. */
export type InspectCommandOptions =
  | { kind: "path"; path: string }
  | { kind: "config"; configPath: string; pipelineId: string; bundlePath?: string }
  | { kind: "destination"; configPath: string; pipelineId: string; destinationId: string };
