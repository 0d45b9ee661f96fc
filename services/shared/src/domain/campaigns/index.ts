/**
 * Every campaign niclab runs, and the one a spec asks for. Adding a campaign: its module here
 * (a Campaign: its spec errors, inventory defaults, run count, strategy, report section, table
 * lines, job end), one line below, and its fields in openapi.yaml.
 */
import type { JobSpec } from '../contract.js';
import type { Campaign, CampaignStrategy } from './campaign.js';
import { factorial } from './factorial.js';
import { mlrSearch } from './mlr-search.js';
import { pairRounds } from './pair-rounds.js';
import { rateSearch } from './rate-search.js';
import { sweepRepeat } from './sweep-repeat.js';

export type { Campaign, CampaignStrategy, RunCount } from './campaign.js';

/** In the order they are asked: the first whose `asks` is true runs the job; sweep × repeat asks for every spec. */
export const CAMPAIGNS: readonly Campaign[] = [pairRounds, mlrSearch, rateSearch, factorial, sweepRepeat];

export function campaignOf(spec: JobSpec): Campaign {
  return CAMPAIGNS.find((campaign) => campaign.asks(spec))!;
}

/** The run chooser a job's spec asks for. */
export function strategyFor(spec: JobSpec): CampaignStrategy {
  return campaignOf(spec).strategy(spec);
}
