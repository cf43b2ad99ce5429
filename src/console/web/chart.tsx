// A time-series chart drawn by uPlot into a canvas (styles are set through the CSSOM, which the
// page's Content-Security-Policy allows; no inline style attribute is parsed).

import type { JSX } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

export interface Series {
  readonly label: string;
  readonly color: string;
  readonly values: readonly number[];
}

export function TimeChart(props: {
  title: string;
  /** Unix seconds, one per point. */
  times: readonly number[];
  series: readonly Series[];
  height?: number;
}): JSX.Element {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = host.current;
    if (!element) return undefined;
    const width = Math.max(320, element.clientWidth);
    const plot = new uPlot(
      {
        width,
        height: props.height ?? 220,
        series: [
          {},
          ...props.series.map((series) => ({
            label: series.label,
            stroke: series.color,
            fill: series.color + '22',
            width: 2,
            points: { show: false },
          })),
        ],
        axes: [{ stroke: '#667085' }, { stroke: '#667085', size: 48 }],
        scales: { x: { time: true }, y: { range: (_plot, _min, max) => [0, Math.max(5, max)] } },
        legend: { show: true },
        cursor: { drag: { x: false, y: false } },
      },
      [[...props.times], ...props.series.map((series) => [...series.values])],
      element,
    );
    const onResize = (): void => plot.setSize({ width: element.clientWidth, height: plot.height });
    addEventListener('resize', onResize);
    return () => {
      removeEventListener('resize', onResize);
      plot.destroy();
    };
  }, [props.times, props.series, props.height]);
  return <div class="chart" ref={host} role="img" aria-label={props.title} />;
}
