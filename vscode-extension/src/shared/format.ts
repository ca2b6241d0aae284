/** Number formatting shared by the extension host and the webviews (same rules as the server). */

/** `5.9 µs`, `35 µs`, `0.20 ms`, `12.3 ms`, `1.20 s`; `—` when unknown. */
export function formatLatency(us: number | null | undefined): string {
  if (us === null || us === undefined || !Number.isFinite(us)) return "—";
  if (us < 100) return us < 10 ? `${us.toFixed(1)} µs` : `${us.toFixed(0)} µs`;
  if (us < 1e6) {
    const ms = us / 1000;
    return ms < 10 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(1)} ms`;
  }
  return `${(us / 1e6).toFixed(2)} s`;
}

/** `107×`, `3.4×`; empty when unknown. */
export function formatSpeedup(speedup: number | null | undefined): string {
  if (!speedup || !Number.isFinite(speedup)) return "";
  return speedup >= 10 ? `${speedup.toFixed(0)}×` : `${speedup.toFixed(1)}×`;
}

/** `42 %` of a 0..1 share; empty when unknown. */
export function formatShare(share: number | null | undefined): string {
  if (share === null || share === undefined || !Number.isFinite(share)) return "";
  return `${(share * 100).toFixed(share < 0.1 ? 1 : 0)} %`;
}
