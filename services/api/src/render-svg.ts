/**
 * Vega-Lite spec to SVG, in Node: vega-lite compiles the spec to Vega, vega's headless View
 * renders it. No browser and no canvas (node-canvas is only needed for PNG, which we skip).
 */
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { ChartSpec } from '@niclab/shared/domain/plots';

/** The chart as a standalone SVG document. */
export async function renderSvg(spec: ChartSpec): Promise<string> {
  const compiled = compile(spec as unknown as TopLevelSpec).spec;
  // renderer 'none': the scenegraph is built without a canvas; toSVG renders it to a string.
  const view = new vega.View(vega.parse(compiled), { renderer: 'none', logLevel: vega.Warn });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
