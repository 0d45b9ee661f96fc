import type { Run } from '@niclab/shared/domain/contract';

/**
 * The API's own links: an end whose raw engine output was kept (the coordinator records
 * `rawKept`) gets the path that serves it, so the route's shape lives in the API alone.
 */
export function withRawLinks(runs: Run[]): Run[] {
  for (const run of runs) {
    run.flows.forEach((flow, i) => {
      for (const end of ['sender', 'receiver'] as const) {
        const diagnostics = flow.diagnostics[end];
        if (diagnostics?.rawKept) diagnostics.rawOutput = `/v1/jobs/${run.jobId}/runs/${run.index}/flows/${i}/${end}/raw`;
      }
    });
  }
  return runs;
}
