import type { Leases, LeaseTarget } from '@niclab/shared/stores/leases';
import type { Logger } from '@niclab/shared/runtime/logger';

/**
 * Keeps a run's interface leases while it lasts: renews them three times per TTL. A lease
 * found lost (Redis restarted from an older AOF) is taken back at the next renewal, never
 * from another run; the agents' own lease watch ends a run whose coordinator is gone.
 */
export class LeaseKeeper {
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly leases: Leases, private readonly holder: string, private readonly targets: LeaseTarget[], private readonly log: Logger) {}

  start(): this {
    const count = this.leases.distinct(this.targets).length;
    this.timer = setInterval(() => {
      this.leases.renew(this.holder, this.targets).then(
        (held) => held < count && this.log.warn({ held, of: count }, 'lost an interface lease'),
        (error: unknown) => this.log.warn({ err: error }, 'lease renewal failed'),
      );
    }, this.leases.renewEveryMs);
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
