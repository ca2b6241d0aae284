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

/** One unit for a whole table (µs, ms or s, by its largest value), so its cells compare at a glance:
 * `tableLatency(values)(us)` formats every cell of that table in the same unit with 3 significant digits. */
export function tableLatency(values: readonly (number | null | undefined)[]): (us: number | null | undefined) => string {
  const finite = values.filter((v): v is number => typeof v === "number" && Number.isFinite(v));
  const top = finite.length ? Math.max(...finite) : 0;
  const [div, unit] = top >= 1e6 ? [1e6, "s"] : top >= 1e3 ? [1e3, "ms"] : [1, "µs"];
  return (us) => {
    if (us === null || us === undefined || !Number.isFinite(us)) return "—";
    const v = us / div;
    return `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : v >= 1 ? 2 : 3)} ${unit}`;
  };
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
