// The test-only Prometheus text-format parser ships no types; this is the part the tests use.
declare module "parse-prometheus-text-format" {
  interface Sample {
    labels?: Record<string, string>;
    value?: string;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  interface Family {
    name: string;
    help: string;
    type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    metrics: Sample[];
  }
  export default function parsePrometheusTextFormat(text: string): Family[];
}
