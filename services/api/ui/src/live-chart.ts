/**
 * The interval chart of a running job, drawn from its `interval` events: throughput over time,
 * a line per leg of each run in progress (a group's rounds run several pairs at once). The
 * finished job's figures come from the API's own SVG.
 */
const SVG_NS = 'http://www.w3.org/2000/svg';
const W = 640;
const H = 220;
const PAD = { left: 56, right: 12, top: 24, bottom: 32 };
const COLOURS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'];

interface Sample {
  end: number;
  bitsPerSecond: number;
}

function svgEl(tag: string, attrs: Record<string, string | number>): SVGElement {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** A run that has sent no sample for this long has ended: the next run's lines replace it. */
const ENDED_MS = 3000;

interface Series {
  runId: string;
  leg: number;
  samples: Sample[];
}

export class LiveChart {
  readonly element: SVGSVGElement;
  /** By `runId/leg`, in the order they first sent a sample. */
  private series = new Map<string, Series>();
  private lastSeen = new Map<string, number>();

  constructor() {
    this.element = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, class: 'live-chart', role: 'img', 'aria-label': 'throughput of the runs in progress (Mbit/s) against time (s)' }) as SVGSVGElement;
    this.draw();
  }

  /**
   * Adds a receiver's sample. Runs that sent one lately stay on the chart beside it (parallel
   * runs interleave their samples); a run quiet for ENDED_MS has ended and is dropped.
   */
  add(runId: string, leg: number, sample: Sample, now = performance.now()): void {
    this.lastSeen.set(runId, now);
    for (const [run, seen] of this.lastSeen) {
      if (now - seen < ENDED_MS) continue;
      this.lastSeen.delete(run);
      for (const [key, s] of this.series) if (s.runId === run) this.series.delete(key);
    }
    const key = `${runId}/${leg}`;
    const series = this.series.get(key) ?? { runId, leg, samples: [] };
    series.samples.push(sample);
    this.series.set(key, series);
    this.draw();
  }

  private draw(): void {
    const all = [...this.series.values()].flatMap((s) => s.samples);
    const maxX = Math.max(1, ...all.map((s) => s.end));
    const maxY = Math.max(1, ...all.map((s) => s.bitsPerSecond / 1e6)) * 1.1;
    const x = (t: number) => PAD.left + (t / maxX) * (W - PAD.left - PAD.right);
    const y = (mbps: number) => H - PAD.bottom - (mbps / maxY) * (H - PAD.top - PAD.bottom);
    const nodes: SVGElement[] = [
      svgEl('line', { x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom, class: 'axis' }),
      svgEl('line', { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom, class: 'axis' }),
    ];
    const label = (text: string, attrs: Record<string, string | number>) => {
      const t = svgEl('text', attrs);
      t.textContent = text;
      nodes.push(t);
    };
    label('time (s)', { x: (W + PAD.left) / 2, y: H - 4, 'text-anchor': 'middle', class: 'axis-title' });
    label('Mbit/s', { x: 4, y: 12, class: 'axis-title' });
    label(maxY.toFixed(maxY < 10 ? 1 : 0), { x: PAD.left - 4, y: PAD.top + 10, 'text-anchor': 'end' });
    label(maxX.toFixed(1), { x: W - PAD.right, y: H - PAD.bottom + 14, 'text-anchor': 'end' });
    [...this.series.values()].forEach(({ runId, leg, samples }, i) => {
      const colour = COLOURS[i % COLOURS.length]!;
      const name = `run ${runId.slice(0, 8)} leg ${leg}`;
      const points = samples.map((s) => `${x(s.end).toFixed(1)},${y(s.bitsPerSecond / 1e6).toFixed(1)}`);
      nodes.push(svgEl('polyline', { points: points.join(' '), fill: 'none', stroke: colour, 'stroke-width': 2, 'data-run': runId, 'data-leg': leg }));
      for (const s of samples) {
        const dot = svgEl('circle', { cx: x(s.end).toFixed(1), cy: y(s.bitsPerSecond / 1e6).toFixed(1), r: 3, fill: colour, class: 'sample', 'data-run': runId, 'data-leg': leg });
        const title = svgEl('title', {});
        title.textContent = `${name}: ${s.end.toFixed(2)} s, ${(s.bitsPerSecond / 1e6).toFixed(2)} Mbit/s`;
        dot.append(title);
        nodes.push(dot);
      }
    });
    this.element.replaceChildren(...nodes);
  }
}
