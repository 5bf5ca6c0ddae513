/**
 * Keeps the daemon's price table current (opt-in, METER_PRICES_REMOTE): at start the last good
 * copy in METER_DATA_DIR is put in force, then the remote file is fetched, validated, saved and
 * put in force; again every 24 hours. A copy written by `meter pricing update` is picked up within
 * a minute. Anything that fails leaves the table in force as it was (the copy, else the bundled
 * catalogue), and the log says why.
 */
import { PeriodicTask } from '../periodic.js';
import { maskUrl, maskUrlsIn } from '../config.js';
import type { Logger } from '../log.js';
import {
  activatePriceData,
  activateBundled,
  activePriceTable,
  fetchPriceData,
  loadSavedPriceData,
  PriceDataError,
  savedPriceDataMtime,
  savePriceData,
  type FetchOptions,
} from './price-data.js';

export const REFRESH_INTERVAL_MS = 24 * 60 * 60 * 1000;
const WATCH_INTERVAL_MS = 60 * 1000;

export interface PriceRefresherOptions {
  dataDir: string;
  /** METER_PRICES_REMOTE; unset: only the saved copy (from `meter pricing update`) is used. */
  remoteUrl: string | undefined;
  logger: Pick<Logger, 'info' | 'warn'>;
  intervalMs?: number;
  watchIntervalMs?: number;
  fetch?: FetchOptions;
}

export class PriceRefresher {
  #loops: PeriodicTask[] = [];
  #savedMtime: number | undefined;
  #running: Promise<void> | undefined;

  constructor(private readonly opts: PriceRefresherOptions) {}

  /** Puts the saved copy in force (synchronously, before the first call), then starts the
   *  first fetch without waiting for it. */
  start(): void {
    this.loadSaved('start');
    // Both never throw: a fetch or a load that failed is logged by refresh() and loadSaved().
    const loop = (what: string, pauseMs: number, task: () => Promise<void> | void) => {
      const l = new PeriodicTask(async () => task(), { what, logger: this.opts.logger, pauseMs });
      this.#loops.push(l);
      void l.start('after-pause');
    };
    if (this.opts.remoteUrl) {
      this.#running = this.refresh();
      loop('price data: fetch', this.opts.intervalMs ?? REFRESH_INTERVAL_MS, () => this.refresh());
    }
    loop('price data: saved copy watch', this.opts.watchIntervalMs ?? WATCH_INTERVAL_MS, () => {
      if (savedPriceDataMtime(this.opts.dataDir) !== this.#savedMtime) this.loadSaved('changed');
    });
  }

  /** The first fetch, for tests and for a start that wants to wait for it. */
  settled(): Promise<void> {
    return this.#running ?? Promise.resolve();
  }

  async stop(): Promise<void> {
    const loops = this.#loops.splice(0);
    await Promise.all(loops.map((l) => l.stop()));
  }

  /** Fetches the remote file once; on success it is saved and in force. Never throws. */
  async refresh(): Promise<void> {
    const remote = this.opts.remoteUrl;
    if (!remote) return;
    const url = maskUrl(remote); // what logs say: never the URL's password or token
    try {
      const data = await fetchPriceData(remote, this.opts.fetch);
      if (data.info.version === activePriceTable().version) {
        this.opts.logger.info({ priceVersion: data.info.version, url }, 'price data: unchanged');
        return;
      }
      savePriceData(this.opts.dataDir, data);
      this.#savedMtime = savedPriceDataMtime(this.opts.dataDir);
      activatePriceData(data);
      this.opts.logger.info(
        { priceVersion: data.info.version, models: data.info.models, url },
        'price data: updated from METER_PRICES_REMOTE',
      );
    } catch (err) {
      const why = maskUrlsIn(err instanceof PriceDataError ? err.message : (err as Error).message);
      const inForce = activePriceTable();
      this.opts.logger.warn(
        { url, reason: why, priceVersion: inForce.version },
        `price data from METER_PRICES_REMOTE not used: ${why}; keeping ${inForce.origin === 'bundled' ? 'the bundled catalogue' : 'the last good copy'} (${inForce.version})`,
      );
    }
  }

  private loadSaved(when: 'start' | 'changed'): void {
    this.#savedMtime = savedPriceDataMtime(this.opts.dataDir);
    try {
      const data = loadSavedPriceData(this.opts.dataDir);
      if (!data) {
        if (when === 'changed' && activePriceTable().origin !== 'bundled') {
          void activateBundled();
          this.opts.logger.info('price data: saved copy removed; using the bundled catalogue');
        }
        return;
      }
      if (data.info.version === activePriceTable().version) return;
      activatePriceData(data);
      this.opts.logger.info(
        { priceVersion: data.info.version, source: data.info.source, fetchedAt: data.info.fetchedAt },
        'price data: using the saved copy',
      );
    } catch (err) {
      this.opts.logger.warn(
        { reason: (err as Error).message, priceVersion: activePriceTable().version },
        `price data: the saved copy in METER_DATA_DIR cannot be used: ${(err as Error).message}; keeping ${activePriceTable().version}`,
      );
    }
  }
}
