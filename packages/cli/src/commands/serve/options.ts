/** What `distributor serve` hands its handler once its flags are checked. */
export interface ServeCommandOptions {
  /** `--config`, defaulting to `./distributor.yml`. */
  configPath: string;
  /** `--listen`, overriding `server.http.listen`. */
  listen?: string;
}
