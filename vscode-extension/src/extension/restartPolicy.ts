/** When to restart a crashed language server: at most `limit` crashes within `windowMs`. Pure. */
export class RestartPolicy {
  private crashes: number[] = [];

  constructor(readonly limit = 5, readonly windowMs = 3 * 60_000) {}

  /** Record a crash at `now`; true when the server should be restarted. */
  crashed(now: number = Date.now()): boolean {
    this.crashes = this.crashes.filter((t) => now - t < this.windowMs);
    this.crashes.push(now);
    return this.crashes.length <= this.limit;
  }

  /** Crashes within the window (as of the last call). */
  get recent(): number {
    return this.crashes.length;
  }

  reset(): void {
    this.crashes = [];
  }
}
